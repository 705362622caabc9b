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
  /**
   * Called when the handler threw or its response could not be written (the listener then answers
   * 500, or closes the connection when the response had begun). Not called for what a client did:
   * a request that is not a valid Fetch request gets 400, a client that left gets its socket
   * closed. A throw here is ignored.
   * @default console.error
   */
  onError?: ((error: unknown, req: IncomingMessage) => void) | undefined;
}

/**
 * A `node:http` listener that serves `handler`. No request ends the process: every failure is
 * answered (400 for a request a Fetch `Request` cannot be made of, such as `Host: a b`; 500 when
 * the handler throws) or ends with the connection closed (a client that left mid-body); no
 * `'error'` is emitted and no promise is left to reject.
 */
export function nodeListener(
  handler: (request: Request) => Promise<Response>,
  options: NodeListenerOptions = {},
): (req: IncomingMessage, res: ServerResponse) => void {
  const origin = options.origin ?? 'http://localhost';
  const onError = options.onError ?? ((err: unknown) => console.error('@once/http/node:', err));
  return (req, res) => {
    serve(handler, req, res, origin).catch((err: unknown) => {
      try {
        onError(err, req);
      } catch {
        // a throwing onError changes nothing
      }
      answer(res, 500);
    });
  };
}

class ClientLeft extends Error {}

async function serve(
  handler: (request: Request) => Promise<Response>,
  req: IncomingMessage,
  res: ServerResponse,
  origin: string,
): Promise<void> {
  let body: Buffer;
  try {
    body = await readBody(req);
  } catch {
    // The client left (or its request broke off mid-body): nobody to answer, nothing ran.
    res.destroy();
    return;
  }
  const request = toRequest(req, body, origin);
  if (request === undefined) {
    answer(res, 400);
    return;
  }
  const response = await handler(request);
  const out = Buffer.from(await response.arrayBuffer());
  if (res.destroyed || res.headersSent) return; // the client left; what committed stays committed
  res.statusCode = response.status;
  for (const [name, value] of response.headers) {
    if (name === 'set-cookie') continue;
    res.setHeader(name, value);
  }
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) res.setHeader('set-cookie', cookies);
  res.end(out);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  if (!req.complete) throw new ClientLeft('the request ended before its body did');
  return Buffer.concat(chunks);
}

/**
 * The Fetch request of a Node request, or undefined when it cannot be one: a Host that is not a
 * host (`a b`), a target that does not parse, credentials in the URL, a method Fetch forbids
 * (`TRACE`), a header value Fetch refuses.
 */
function toRequest(req: IncomingMessage, body: Buffer, origin: string): Request | undefined {
  try {
    const headers = new Headers();
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
      headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
    const base = req.headers.host ? `http://${req.headers.host}` : origin;
    const method = req.method ?? 'GET';
    return new Request(new URL(req.url ?? '/', base), {
      method,
      headers,
      body: method === 'GET' || method === 'HEAD' ? null : body,
    });
  } catch {
    return undefined;
  }
}

/** Answers `status` with no body if nothing was sent yet, else closes the connection. */
function answer(res: ServerResponse, status: number): void {
  if (res.destroyed) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  try {
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    res.statusCode = status;
    res.setHeader('content-length', '0');
    if (status === 400) res.setHeader('connection', 'close');
    res.end();
  } catch {
    res.destroy();
  }
}
