import { request as httpRequest } from 'node:http';
import { migrate } from '@once/core';
import { createIdempotency } from '@once/http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenExpress } from '../support/bindings/express.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFastify } from '../support/bindings/fastify.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFetch } from '../support/bindings/fetch.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenNode } from '../support/bindings/node.mjs';
import {
  type Act,
  type BindingName,
  CORPUS,
  type CorpusCase,
  type Expect,
  HANDLER_TIMEOUT_MS,
  JSON_TYPE,
} from '../support/corpus-cases.js';
// @ts-expect-error plain JavaScript shared with the child server processes
import { createTestTables } from '../support/routes.mjs';

// The failure-path corpus (test/support/corpus-cases.ts) through all four bindings, each on a real
// server on 127.0.0.1 and a real PostgreSQL, a schema per binding. Every case checks the status
// (and problem type), what the inbox holds for the key, the effects, and the retry's end state.

type Listen = (o: unknown) => Promise<{ port: number; close: () => Promise<void> }>;
const BINDINGS: ReadonlyArray<readonly [BindingName, Listen]> = [
  ['fetch', listenFetch as Listen],
  ['node', listenNode as Listen],
  ['fastify', listenFastify as Listen],
  ['express', listenExpress as Listen],
];
const CONSUMER = 'http.corpus';
/** The handler when the case sets none (and on a retry): one effect, 201. */
const plainCharge: Act = async ({ effect }) => {
  await effect();
  return 201;
};
const PRINCIPAL = 'corpus';

interface Sent {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}
/** One raw HTTP/1.1 POST (node:http, so duplicate fields and any bytes can be sent). */
function send(port: number, headers: Record<string, string | string[]>, body: Buffer): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, path: '/charges', method: 'POST', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    // A server may answer 413 and close while the body is still going out.
    req.on('error', reject);
    req.end(body);
  });
}

describe.each(BINDINGS)('failure-path corpus through the %s binding', (name, listen) => {
  let pool: pg.Pool;
  let schema: string;
  const servers: Record<'normal' | 'missing-schema', { port: number; close: () => Promise<void> }> =
    {} as never;
  /** The act for each key's next attempt (the test sets it before each request). */
  const acts = new Map<string, Act>();

  beforeAll(async () => {
    pool = createTestPool({ max: 4 });
    schema = freshSchemaName(`http_corpus_${name}`);
    await migrate(pool, { schema });
    await createTestTables(pool, schema);
    const routesFor = () => ({
      async charge(ctx: { tx: pg.PoolClient; key: string }, input: { key: string; body: unknown }) {
        const effect = async () => {
          await ctx.tx.query(
            `INSERT INTO "${schema}".http_effects (route, principal, key) VALUES ('corpus', $1, $2)`,
            [PRINCIPAL, input.key],
          );
        };
        const act: Act = acts.get(input.key) ?? plainCharge;
        const status = await act({ ctx, pool, schema, key: input.key, effect });
        return { status, headers: [], json: { key: input.key, status } };
      },
      naive: () => {
        throw new Error('not served');
      },
      leaseCharge: () => {
        throw new Error('not served');
      },
    });
    const engine = (s: string) =>
      createIdempotency({
        pool,
        schema: s,
        consumer: CONSUMER,
        logger: false,
        lockTimeoutMs: 500,
        handlerTimeoutMs: HANDLER_TIMEOUT_MS,
      });
    servers.normal = await listen({ engine: engine(schema), routes: routesFor() });
    servers['missing-schema'] = await listen({
      engine: engine(`${schema}_missing`),
      routes: routesFor(),
    });
  });
  afterAll(async () => {
    await servers.normal?.close();
    await servers['missing-schema']?.close();
    await dropSchema(pool, schema);
    await pool.end();
  });

  let n = 0;
  const newKey = () => `c-${name}-${++n}-${Math.random().toString(36).slice(2, 8)}`;

  const request = (c: CorpusCase, key: string, over: CorpusCase['request'] = {}) => {
    const r = { ...c.request, ...over };
    const keyHeader = r.keyHeader ? r.keyHeader(key) : key;
    const body = r.body ?? Buffer.from(JSON.stringify({ amount: 100 }));
    return send(
      servers[c.server ?? 'normal'].port,
      {
        'content-type': r.contentType ?? JSON_TYPE,
        'x-principal': PRINCIPAL,
        'idempotency-key': keyHeader,
        'content-length': String(body.length),
      },
      body,
    );
  };
  /** The key as stored: the key the server saw (a padded one for the length cases). */
  const storedKey = (c: CorpusCase, key: string) => {
    const h = c.request?.keyHeader ? c.request.keyHeader(key) : key;
    return typeof h === 'string' ? h : key;
  };
  const check = async (res: Sent, key: string, e: Expect) => {
    expect(res.status, res.body.toString('utf8').slice(0, 300)).toBe(e.status);
    if (e.problem) {
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(res.body.toString('utf8')).type).toMatch(new RegExp(`#${e.problem}$`));
    }
    const { rows } = await pool.query(
      `SELECT status, response_status FROM "${schema}".inbox WHERE consumer = $1 AND message_id = $2`,
      [CONSUMER, `${PRINCIPAL}/${key}`],
    );
    if (e.stored.kind === 'nothing') expect(rows).toEqual([]);
    else expect(rows).toEqual([{ status: 'done', response_status: e.stored.status }]);
    const eff = await pool.query(`SELECT count(*)::int AS n FROM "${schema}".http_effects WHERE key = $1`, [
      key,
    ]);
    expect(eff.rows[0].n).toBe(e.effects);
  };

  for (const c of CORPUS) {
    const na = c.notApplicable?.[name];
    // A case the binding cannot express (its reason is in the case) is not registered at all:
    // a skipped test would read as unfinished work.
    if (na) continue;
    const bug = c.knownBug?.[name];
    (bug ? it.fails : it)(bug ? `${c.name} (known bug: ${bug})` : c.name, { timeout: 20_000 }, async () => {
      const key = newKey();
      const sk = storedKey(c, key);
      if (c.act) acts.set(sk, c.act);
      const first = await request(c, key);
      await check(first, sk, c.byBinding?.[name] ?? c.expect);
      if (!c.retry) return;
      acts.delete(sk);
      if (c.retry.act) acts.set(sk, c.retry.act);
      const again = await request(c, key, c.retry.request);
      const re = c.retry.byBinding?.[name] ?? c.retry.expect;
      await check(again, sk, re);
      expect(again.headers['idempotent-replayed']).toBe(re.replayed ? 'true' : undefined);
      if (re.replayed && first.status === re.status) expect(again.body.equals(first.body)).toBe(true);
    });
  }
});
