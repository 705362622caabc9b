import type { IncomingMessage } from 'node:http';

// Where keepRawBody leaves the bytes; a registry symbol, so two copies of the package agree.
const kRawBody = Symbol.for('@once/http.rawBody');

type WithRawBody = IncomingMessage & { [kRawBody]?: Uint8Array; body?: unknown };

/**
 * A `verify` function for Express's body parsers that keeps the bytes they read, for the
 * fingerprint of idempotent routes: `express.json({ verify: keepRawBody })` (also
 * `express.raw`, `express.text`, `express.urlencoded`). The bytes are the body after any
 * `Content-Encoding` was undone.
 */
export function keepRawBody(req: IncomingMessage, _res: unknown, buf: Buffer, _encoding?: string): void {
  (req as WithRawBody)[kRawBody] = buf;
}

/** What {@link readRawBody} found. */
export type RawBodyResult =
  | { readonly kind: 'bytes'; readonly bytes: Uint8Array }
  | { readonly kind: 'consumed' }
  | { readonly kind: 'too-large'; readonly limitBytes: number };

/**
 * The request body's bytes: those {@link keepRawBody} kept; none for a request without a body;
 * else, when no parser has read the stream, read here (up to `limitBytes`) and left in `req.body`
 * as a Buffer, as `express.raw()` would. `consumed` when a parser read it without `keepRawBody`.
 */
export async function readRawBody(req: IncomingMessage, limitBytes: number): Promise<RawBodyResult> {
  const r = req as WithRawBody;
  const kept = r[kRawBody];
  if (kept !== undefined) return { kind: 'bytes', bytes: kept };
  const te = req.headers['transfer-encoding'];
  const length = req.headers['content-length'];
  if (te === undefined && (length === undefined || length === '0'))
    return { kind: 'bytes', bytes: new Uint8Array(0) };
  if (req.readableEnded || r.body !== undefined) return { kind: 'consumed' };
  if (length !== undefined && Number(length) > limitBytes) return { kind: 'too-large', limitBytes };
  const chunks: Buffer[] = [];
  let total = 0;
  const fits = await new Promise<boolean>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total <= limitBytes) {
        chunks.push(chunk);
        return;
      }
      // Over the limit: stop keeping it, but drain the rest so a 413 can still be sent.
      cleanup();
      req.resume();
      resolve(false);
    };
    const onEnd = () => {
      cleanup();
      resolve(true);
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
  if (!fits) return { kind: 'too-large', limitBytes };
  const bytes = Buffer.concat(chunks, total);
  r[kRawBody] = bytes;
  r.body = bytes;
  return { kind: 'bytes', bytes };
}
