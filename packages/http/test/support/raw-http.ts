import { connect } from 'node:net';

// A raw HTTP/1.1 client on node:net (loopback only), for requests no HTTP client library would
// send: cut at any byte, malformed, stalled, or reset.

/**
 * How the client ends its side once its bytes are written: `fin` half-closes at once (Node's
 * server takes that as a client that left, and aborts a request still in progress), `rst`
 * resets, `wait` waits for the server to answer and close (`Connection: close`), `stall` sends
 * nothing more (only the server's timeouts end it). `wait` and `stall` differ in intent only.
 */
export type Ending = 'fin' | 'rst' | 'wait' | 'stall';

/** What came back on one connection. */
export interface Exchange {
  /** Every byte the server sent. */
  readonly data: Buffer;
  /** The status of the first response, or 0 when none came. */
  readonly status: number;
  /** The server did not close the connection within the guard (a hang). */
  readonly hung: boolean;
  /** A socket error on the client's side (ECONNRESET after the server reset it), if any. */
  readonly error?: string;
}

/**
 * Connects to 127.0.0.1:`port`, writes `bytes` (in `pieces` writes, to cut across packets), ends
 * as `ending` says, and resolves when the server has closed the connection, or after `guardMs`
 * (a hang guard, not a timing: the server's own timeouts end every stall well before it).
 */
export function exchange(
  port: number,
  bytes: Buffer,
  ending: Ending,
  guardMs = 20_000,
  pieces = 1,
): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const received: Buffer[] = [];
    let error: string | undefined;
    let hung = false;
    const guard = setTimeout(() => {
      hung = true;
      socket.destroy();
    }, guardMs);
    socket.on('data', (d: Buffer) => received.push(d));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    socket.on('close', () => {
      clearTimeout(guard);
      const data = Buffer.concat(received);
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(data.subarray(0, 16).toString('latin1'));
      resolve({ data, status: m ? Number(m[1]) : 0, hung, ...(error === undefined ? {} : { error }) });
    });
    socket.on('connect', () => {
      const size = Math.max(1, Math.ceil(bytes.length / pieces));
      for (let at = 0; at < bytes.length; at += size) socket.write(bytes.subarray(at, at + size));
      if (ending === 'fin') socket.end();
      else if (ending === 'rst') socket.resetAndDestroy();
    });
  });
}

/** The body of a complete `Connection: close` response (Content-Length or chunked). */
export function bodyOf(data: Buffer): Buffer {
  const split = data.indexOf('\r\n\r\n');
  if (split < 0) return Buffer.alloc(0);
  const head = data.subarray(0, split).toString('latin1').toLowerCase();
  const rest = data.subarray(split + 4);
  if (!/\r\ntransfer-encoding:\s*chunked/.test(head)) return rest;
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = rest.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = Number.parseInt(rest.subarray(at, eol).toString('latin1'), 16);
    if (!(size > 0)) break;
    out.push(rest.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}
