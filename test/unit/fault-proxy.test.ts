import net from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FaultProxy } from '../support/index.js';

// A local echo server stands in for a service: the proxy's job is bytes and sockets, not protocols.
let echo: net.Server;
let echoPort: number;
let proxy: FaultProxy;

beforeEach(async () => {
  echo = net.createServer((s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as net.AddressInfo).port;
  proxy = await FaultProxy.start({ host: '127.0.0.1', port: echoPort });
});

afterEach(async () => {
  await proxy.close();
  await new Promise((r) => echo.close(r));
});

/** Connects through the proxy; resolves once connected, collecting what comes back. */
async function connect(): Promise<{ socket: net.Socket; received: () => string; ended: Promise<string> }> {
  const socket = net.connect(proxy.port, '127.0.0.1');
  let data = '';
  socket.on('data', (d) => {
    data += d.toString();
  });
  const ended = new Promise<string>((resolve) => {
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
    socket.on('close', () => resolve('closed'));
  });
  await new Promise((r, j) => socket.once('connect', r).once('error', j));
  return { socket, received: () => data, ended };
}

const until = async (cond: () => boolean, ms = 2000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('FaultProxy', () => {
  it('forwards both ways', async () => {
    const c = await connect();
    c.socket.write('hello');
    await until(() => c.received() === 'hello');
    expect(proxy.openCount).toBe(1);
    c.socket.destroy();
  });

  it('cutAll resets open connections and still accepts new ones', async () => {
    const c = await connect();
    c.socket.write('x');
    await until(() => c.received() === 'x');
    proxy.cutAll();
    expect(await c.ended).toBe('ECONNRESET');
    const d = await connect();
    d.socket.write('again');
    await until(() => d.received() === 'again');
    d.socket.destroy();
  });

  it('refuse(true) resets new connections until refuse(false)', async () => {
    proxy.refuse(true);
    // The reset may arrive before or after the client sees its connect complete.
    const refused = net.connect(proxy.port, '127.0.0.1');
    const outcome = await new Promise<string>((resolve) => {
      refused.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
      refused.on('close', () => resolve('closed'));
    });
    expect(['ECONNRESET', 'closed']).toContain(outcome);
    proxy.refuse(false);
    const d = await connect();
    d.socket.write('ok');
    await until(() => d.received() === 'ok');
    expect(proxy.acceptedCount).toBe(2);
    d.socket.destroy();
  });

  it('adds latency in order, and dropping it does not reorder bytes', async () => {
    const c = await connect();
    proxy.latencyMs(150);
    const t0 = Date.now();
    c.socket.write('a');
    await until(() => c.received() === 'a');
    // Two proxy hops (there and back) each wait 150 ms.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    c.socket.write('b');
    await new Promise((r) => setTimeout(r, 20));
    proxy.latencyMs(0);
    c.socket.write('c');
    await until(() => c.received().length === 3);
    expect(c.received()).toBe('abc');
    c.socket.destroy();
  });

  it('rewrites urls to point at itself', () => {
    expect(proxy.url('postgres://postgres@127.0.0.1:5432/test')).toBe(
      `postgres://postgres@127.0.0.1:${proxy.port}/test`,
    );
    expect(proxy.url('amqp://guest:guest@localhost:5672')).toBe(`amqp://guest:guest@127.0.0.1:${proxy.port}`);
    expect(proxy.url('127.0.0.1:9092')).toBe(`127.0.0.1:${proxy.port}`);
  });

  it('close() ends everything', async () => {
    const c = await connect();
    await proxy.close();
    expect(await c.ended).toBe('ECONNRESET');
    await expect(connect()).rejects.toThrow(/ECONNREFUSED/);
    proxy = await FaultProxy.start(`127.0.0.1:${echoPort}`); // for afterEach
  });
});
