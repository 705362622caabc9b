// @ts-check
// A fake mail provider's HTTP API, run outside the consumer so it survives the consumer's crash.
// Like real mail and payment APIs it honours an Idempotency-Key header: the first request with a
// key delivers the email, a repeat with the same key and body gets the first answer back
// (`Idempotent-Replayed: true`) without delivering again, and the same key with another body is
// refused (422). Every call is logged, so a run can show more calls than deliveries.

import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { quoteIdentifier } from '@once/core/admin';

/**
 * @typedef {object} MailApiOptions
 * @property {import('pg').Pool} pool where the provider keeps its calls and delivered emails
 * @property {string} schema holding `mail_api_calls` and `mail_api_emails` (see schema.mjs)
 * @property {number} [loseResponseShare] share (0..1) of keys whose first response is lost after
 *   the email was delivered: the connection is cut, as a timeout would. The client cannot know
 *   the email went out, so it calls again: the window idempotency keys exist for. Default 0.
 * @property {number} [port] default 0 (any free port)
 */

/**
 * @typedef {object} MailApi
 * @property {string} url base URL, e.g. http://127.0.0.1:40123
 * @property {MailApiStats} stats counted by this server since it started
 * @property {() => Promise<void>} close
 */

/**
 * @typedef {object} MailApiStats
 * @property {number} calls requests to POST /v1/emails
 * @property {number} delivered emails delivered (first request of a key)
 * @property {number} replayed repeats answered with the first result
 * @property {number} lost first responses cut off on purpose
 */

const MAX_BODY_BYTES = 65_536;

/**
 * Starts the API on 127.0.0.1.
 * @param {MailApiOptions} options
 * @returns {Promise<MailApi>}
 */
export async function startMailApi({ pool, schema, loseResponseShare = 0, port = 0 }) {
  const s = quoteIdentifier(schema, 'schema');
  /** @type {MailApiStats} */
  const stats = { calls: 0, delivered: 0, replayed: 0, lost: 0 };
  /** @param {string} key */
  const losesFirstResponse = (key) =>
    createHash('sha256').update(key).digest().readUInt32BE(0) / 0x1_0000_0000 < loseResponseShare;

  /**
   * @param {import('node:http').IncomingMessage} req
   * @param {import('node:http').ServerResponse} res
   */
  async function handle(req, res) {
    if (req.method !== 'POST' || req.url !== '/v1/emails') return reply(res, 404, { error: 'not found' });
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || key.length === 0 || key.length > 255)
      return reply(res, 400, { error: 'an Idempotency-Key header (1 to 255 characters) is required' });
    const raw = await readBody(req);
    const email = parseEmail(raw);
    if (!email) return reply(res, 400, { error: 'to, subject, text and reference must be strings' });
    const sha = createHash('sha256').update(raw).digest('hex');
    stats.calls++;
    await pool.query(`INSERT INTO ${s}.mail_api_calls (idempotency_key) VALUES ($1)`, [key]);
    const inserted = await pool.query(
      `INSERT INTO ${s}.mail_api_emails (idempotency_key, request_sha256, reference, recipient, subject)
       VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id::text`,
      [key, sha, email.reference, email.to, email.subject],
    );
    const fresh = inserted.rows[0];
    if (fresh) {
      stats.delivered++;
      if (losesFirstResponse(key)) {
        stats.lost++;
        req.socket.destroy();
        return;
      }
      return reply(res, 201, { id: fresh.id, status: 'delivered' });
    }
    // Read after the insert gave way: a concurrent first request with this key has committed.
    const { rows } = await pool.query(
      `SELECT id::text, request_sha256 FROM ${s}.mail_api_emails WHERE idempotency_key = $1`,
      [key],
    );
    const first = rows[0];
    if (first.request_sha256 !== sha)
      return reply(res, 422, { error: 'this Idempotency-Key was used with a different request' });
    stats.replayed++;
    return reply(res, 200, { id: first.id, status: 'delivered' }, { 'idempotent-replayed': 'true' });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((/** @type {Error} */ err) => {
      if (!res.headersSent && !res.destroyed) reply(res, 500, { error: err.message });
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(undefined));
  });
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    stats,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * @param {import('node:http').ServerResponse} res
 * @param {number} status
 * @param {object} body
 * @param {Record<string, string>} [headers]
 */
function reply(res, status, body, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/**
 * @param {import('node:http').IncomingMessage} req
 * @returns {Promise<Buffer>}
 */
async function readBody(req) {
  /** @type {Buffer[]} */
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Error(`request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * @param {Buffer} raw
 * @returns {{ to: string, subject: string, text: string, reference: string } | undefined}
 */
function parseEmail(raw) {
  try {
    const e = JSON.parse(raw.toString('utf8'));
    const fields = ['to', 'subject', 'text', 'reference'];
    return fields.every((f) => typeof e?.[f] === 'string') ? e : undefined;
  } catch {
    return undefined;
  }
}
