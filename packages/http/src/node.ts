/**
 * `@once/http/node`: a `node:http` request listener over a Fetch handler (such as one from
 * `@once/http/fetch`). The request body is read whole before the handler runs, and the response
 * is written only when the handler's promise settles, i.e. after the key's COMMIT. A client that
 * disconnects does not abort anything: the request commits or rolls back as if it were there.
 *
 * ```ts
 * http.createServer(nodeListener(idempotentFetch(idempotency, { scope, handler }))).listen(3000);
 * ```
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Options of {@link nodeListener}. */
export interface NodeListenerOptions {
  /** The origin the request URL is built on when the request has no Host header. @default 'http://localhost' */
  origin?: string | undefined;
}

/** A `node:http` listener that serves `handler`. */
export function nodeListener(
  handler: (request: Request) => Promise<Response>,
  options: NodeListenerOptions = {},
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    serve(handler, req, res, options.origin ?? 'http://localhost').catch((err: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        res.statusCode = 500;
        res.end();
      }
      res.emit('error', err);
    });
  };
}

async function serve(
  handler: (request: Request) => Promise<Response>,
  req: IncomingMessage,
  res: ServerResponse,
  origin: string,
): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
    headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  const base = req.headers.host ? `http://${req.headers.host}` : origin;
  const method = req.method ?? 'GET';
  const request = new Request(new URL(req.url ?? '/', base), {
    method,
    headers,
    body: method === 'GET' || method === 'HEAD' ? null : body,
  });
  const response = await handler(request);
  const out = Buffer.from(await response.arrayBuffer());
  if (res.destroyed) return; // the client left; what committed stays committed
  res.statusCode = response.status;
  for (const [name, value] of response.headers) {
    if (name === 'set-cookie') continue;
    res.setHeader(name, value);
  }
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) res.setHeader('set-cookie', cookies);
  res.end(out);
}
