import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { nodeListener } from '@once/http/node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exchange } from '../support/raw-http.js';

// @once/http/node's own failure paths (issue #26, item 1), in this process: vitest fails the run
// on an unhandled rejection or an uncaught exception, which is how 72da536's listener ended a
// server (it emitted 'error' on a response with no listener).

const errors: unknown[] = [];
let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer(
    nodeListener(
      async (req) => {
        const path = new URL(req.url).pathname;
        if (path === '/throws') throw new Error('the handler threw on purpose');
        if (path === '/broken-body') {
          // a body whose stream fails while the listener reads it
          return new Response(
            new ReadableStream({
              pull(c) {
                c.error(new Error('the body broke on purpose'));
              },
            }),
          );
        }
        if (path === '/slow') await new Promise((r) => setTimeout(r, 200));
        return new Response(`ok ${req.method} ${await req.text()}`, { status: 201 });
      },
      { onError: (err) => errors.push(err) },
    ),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const raw = (head: string, body = '') =>
  Buffer.from(
    `${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    'latin1',
  );

describe('nodeListener', () => {
  it('answers 400 to a request a Fetch Request cannot be made of, and calls no onError', async () => {
    for (const head of [
      'POST / HTTP/1.1\r\nHost: a b',
      'POST / HTTP/1.1\r\nHost: [::1',
      'POST / HTTP/1.1\r\nHost: user@host',
      'TRACE / HTTP/1.1\r\nHost: a',
    ]) {
      const x = await exchange(port, raw(head, '{}'), 'wait');
      expect(x.status, head).toBe(400);
    }
    expect(errors).toEqual([]);
  });

  it('answers 500 when the handler throws, or its response body fails, and reports both to onError', async () => {
    expect((await exchange(port, raw('POST /throws HTTP/1.1\r\nHost: a', 'x'), 'wait')).status).toBe(500);
    expect((await exchange(port, raw('GET /broken-body HTTP/1.1\r\nHost: a'), 'wait')).status).toBe(500);
    expect(errors.map((e) => (e as Error).message)).toEqual([
      'the handler threw on purpose',
      'the body broke on purpose',
    ]);
    errors.length = 0;
  });

  it('closes the connection of a client that left mid-body or mid-answer, and serves the next', async () => {
    const full = raw('POST /slow HTTP/1.1\r\nHost: a', '{"amount":1}');
    const cut = await exchange(port, full.subarray(0, full.length - 4), 'rst');
    expect(cut.hung).toBe(false);
    const left = await exchange(port, full, 'rst'); // gone while the handler runs
    expect(left.hung).toBe(false);
    await new Promise((r) => setTimeout(r, 300)); // the slow handler has answered into a closed socket
    const next = await exchange(port, raw('POST / HTTP/1.1\r\nHost: a', 'next'), 'wait');
    expect(next.status).toBe(201);
    expect(next.data.toString('latin1')).toMatch(/ok POST next$/);
    expect(errors).toEqual([]);
  });
});
