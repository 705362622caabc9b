import type { OutgoingHttpHeader, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { headerPairs, headersSince, setHeaderPairs } from './fastify-response.js';
import type { HeaderPairs, HttpResponseData } from './types.js';

/** The methods of a response that would put bytes on the wire, replaced while the handler runs. */
const INTERCEPTED = ['writeHead', 'write', 'end', 'flushHeaders'] as const;
type Intercepted = (typeof INTERCEPTED)[number];

/** What a {@link ResponseCapture} observed: the complete response, or a streaming attempt. */
export type CaptureOutcome =
  | { readonly kind: 'response'; readonly response: HttpResponseData }
  | { readonly kind: 'streaming'; readonly via: 'res.write' | 'res.flushHeaders' };

/**
 * Holds an Express response back while the handler runs in the key's transaction: `writeHead`
 * only records the status and headers, `end` hands the complete response over instead of sending
 * it, and `write` or `flushHeaders` (a stream, `res.sendFile`, a pipe) is reported as streaming,
 * which an idempotent route refuses. Nothing reaches the socket until {@link send} is called,
 * after COMMIT; calls after the outcome are ignored (a late error handler, the rest of a pipe).
 *
 * The headers the response held when the capture began (set by middleware before the route:
 * CORS, request ids, `X-Powered-By`) belong to this request, not to its answer: they are left
 * out of the captured response unless the handler changed them, and kept on whatever is sent,
 * replays included. `onAnswered` runs synchronously when the route answers (or streams): the
 * binding ends the route's writes there.
 */
export class ResponseCapture {
  readonly #res: ServerResponse;
  readonly #early: HeaderPairs;
  readonly #onAnswered: () => void;
  readonly #saved = new Map<Intercepted, PropertyDescriptor | undefined>();
  readonly #finishCallbacks: Array<() => void> = [];
  readonly outcome: Promise<CaptureOutcome>;
  #settle!: (outcome: CaptureOutcome) => void;
  #settled = false;

  constructor(res: ServerResponse, onAnswered: () => void) {
    this.#res = res;
    this.#early = headerPairs(res.getHeaders());
    this.#onAnswered = onAnswered;
    this.outcome = new Promise((resolve) => {
      this.#settle = resolve;
    });
    for (const name of INTERCEPTED) this.#saved.set(name, Object.getOwnPropertyDescriptor(res, name));
    const self = this;
    const r = res as unknown as Record<Intercepted, unknown>;
    r.writeHead = function writeHead(this: ServerResponse, status: number, ...rest: unknown[]) {
      if (!self.#settled) self.#recordHead(status, rest);
      return this;
    };
    r.write = function write(this: ServerResponse, ...args: unknown[]) {
      const cb = args.find((a) => typeof a === 'function') as (() => void) | undefined;
      self.#finish({ kind: 'streaming', via: 'res.write' });
      if (cb) queueMicrotask(cb);
      // true: a pipe keeps going into nothing rather than waiting for a 'drain' that never comes.
      return true;
    };
    r.flushHeaders = function flushHeaders() {
      self.#finish({ kind: 'streaming', via: 'res.flushHeaders' });
    };
    r.end = function end(this: ServerResponse, ...args: unknown[]) {
      const cb = args.find((a) => typeof a === 'function') as (() => void) | undefined;
      if (cb) self.#finishCallbacks.push(cb);
      if (!self.#settled) {
        const [chunk, encoding] = args;
        const body =
          chunk === undefined || chunk === null || typeof chunk === 'function'
            ? Buffer.alloc(0)
            : typeof chunk === 'string'
              ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
              : Buffer.from(chunk as Uint8Array);
        self.#finish({
          kind: 'response',
          response: { status: this.statusCode, headers: headersSince(this.getHeaders(), self.#early), body },
        });
      }
      return this;
    };
  }

  #recordHead(status: number, rest: unknown[]): void {
    const res = this.#res;
    res.statusCode = status;
    let headers = rest[0];
    if (typeof headers === 'string') {
      res.statusMessage = headers;
      headers = rest[1];
    }
    if (Array.isArray(headers)) {
      // The raw form: [name, value, name, value, ...].
      for (let i = 0; i + 1 < headers.length; i += 2) appendHeader(res, String(headers[i]), headers[i + 1]);
    } else if (headers !== undefined && headers !== null) {
      for (const [name, value] of Object.entries(headers as OutgoingHttpHeaders)) {
        if (value !== undefined) res.setHeader(name, value);
      }
    }
  }

  #finish(outcome: CaptureOutcome): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#onAnswered();
    this.#settle(outcome);
  }

  /** Puts the response's own methods back and sends `response` (after COMMIT). */
  send(response: HttpResponseData): void {
    this.#settled = true;
    const res = this.#res;
    this.#restore();
    if (res.headersSent || res.destroyed) return; // a client gone before COMMIT: nothing to send to
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    res.statusCode = response.status;
    const set = res.setHeader.bind(res);
    setHeaderPairs(set, this.#early);
    setHeaderPairs(set, response.headers);
    for (const cb of this.#finishCallbacks) res.once('finish', cb);
    res.end(response.body);
  }

  #restore(): void {
    const r = this.#res as unknown as Record<string, unknown>;
    for (const [name, descriptor] of this.#saved) {
      if (descriptor === undefined) delete r[name];
      else Object.defineProperty(r, name, descriptor);
    }
    this.#saved.clear();
  }
}

function appendHeader(res: ServerResponse, name: string, value: unknown): void {
  const prior = res.getHeader(name);
  const next = value as OutgoingHttpHeader;
  if (prior === undefined) res.setHeader(name, next);
  else
    res.setHeader(name, [
      ...(Array.isArray(prior) ? prior : [String(prior)]),
      ...(Array.isArray(next) ? next : [String(next)]),
    ]);
}
