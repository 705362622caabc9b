import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultProxy } from '../support/index.js';

// FaultProxy's listen address (the fault campaign binds one per consumer on the root end of that
// consumer's veth). 127.0.0.2 is loopback on Linux without any setup and stands in for it here.

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

describe('FaultProxy.start({ host })', () => {
  it('listens on the given address and names it in address and url()', async () => {
    const echo = net.createServer((s) => {
      s.on('error', () => {});
      s.pipe(s);
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => echo.close(r)));
    const target = { host: '127.0.0.1', port: (echo.address() as net.AddressInfo).port };
    const proxy = await FaultProxy.start(target, { host: '127.0.0.2' });
    closers.push(() => proxy.close());

    expect(proxy.address).toBe(`127.0.0.2:${proxy.port}`);
    expect(proxy.url('postgres://u:p@db.example:5432/x?a=1')).toBe(
      `postgres://u:p@127.0.0.2:${proxy.port}/x?a=1`,
    );

    const through = net.connect(proxy.port, '127.0.0.2');
    through.on('error', () => {});
    through.write('ping');
    const echoed = await new Promise<string>((r) => through.once('data', (d) => r(d.toString())));
    expect(echoed).toBe('ping');
    through.destroy();
  });

  it('defaults to 127.0.0.1', async () => {
    const proxy = await FaultProxy.start('127.0.0.1:9');
    closers.push(() => proxy.close());
    expect(proxy.address).toBe(`127.0.0.1:${proxy.port}`);
  });
});
