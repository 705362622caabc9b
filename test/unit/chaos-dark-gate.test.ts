import net from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import { DarkGate } from '../../chaos/dark-gate.mjs';

// The fault campaign's stand-in partition where namespaces cannot be made (chaos/dark-gate.mjs):
// while dark it forwards nothing in the chosen direction and loses nothing; on light, what it
// held flows in order, and a reset that came while dark reaches the other side only then.

type Gate = {
  port: number;
  dark(direction: 'both' | 'to-target' | 'to-client'): void;
  light(): void;
  close(): Promise<void>;
};

let server: net.Server;
let serverPort: number;
let gate: Gate;
/** What the server received, per accepted connection, and the server side's sockets. */
let received: string[];
let serverSockets: net.Socket[];

beforeEach(async () => {
  received = [];
  serverSockets = [];
  // Echoes with a prefix, so the test can tell the server's bytes from its own.
  server = net.createServer((s) => {
    const i = received.push('') - 1;
    serverSockets.push(s);
    s.on('error', () => {});
    s.on('data', (d) => {
      received[i] += d.toString();
      s.write(`<${d.toString()}>`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serverPort = (server.address() as net.AddressInfo).port;
  gate = await DarkGate.start({ host: '127.0.0.1', port: serverPort });
});

afterEach(async () => {
  await gate.close();
  await new Promise((r) => server.close(r));
});

async function client() {
  const socket = net.connect(gate.port, '127.0.0.1');
  let data = '';
  const events: string[] = [];
  socket.on('data', (d) => {
    data += d.toString();
  });
  socket.on('error', (e: NodeJS.ErrnoException) => events.push(e.code ?? 'error'));
  socket.on('close', () => events.push('close'));
  await new Promise((r, j) => socket.once('connect', r).once('error', j));
  return { socket, data: () => data, events };
}

const until = async (cond: () => boolean, ms = 3_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('DarkGate', () => {
  it('forwards both ways while lit', async () => {
    const c = await client();
    c.socket.write('a');
    await until(() => c.data() === '<a>');
    c.socket.destroy();
  });

  it('holds both directions while dark and delivers everything, in order, on light', async () => {
    const c = await client();
    c.socket.write('a');
    await until(() => c.data() === '<a>');
    gate.dark('both');
    c.socket.write('b');
    c.socket.write('c');
    serverSockets[0]!.write('!');
    await pause(200);
    expect(received[0]).toBe('a');
    expect(c.data()).toBe('<a>');
    gate.light();
    await until(() => c.data().endsWith('>') && c.data().includes('!') && c.data().includes('c'));
    expect(received[0]).toBe('abc');
    expect(c.data().replace('!', '')).toMatch(/^<a><bc>$|^<a><b><c>$/);
    c.socket.destroy();
  });

  it('holds only the client’s bytes when dark to-target, only the server’s when dark to-client', async () => {
    const c = await client();
    gate.dark('to-target');
    c.socket.write('x');
    await until(() => serverSockets.length === 1);
    serverSockets[0]!.write('s');
    await until(() => c.data() === 's');
    await pause(150);
    expect(received[0]).toBe('');
    gate.dark('to-client');
    // The client's byte now goes through; the server's echo of it is held.
    await until(() => received[0] === 'x');
    await pause(150);
    expect(c.data()).toBe('s');
    gate.light();
    await until(() => c.data() === 's<x>');
    c.socket.destroy();
  });

  it('keeps a reset from the server back until light, as a partition would', async () => {
    const c = await client();
    await until(() => serverSockets.length === 1);
    gate.dark('both');
    serverSockets[0]!.resetAndDestroy();
    await pause(200);
    expect(c.events).toEqual([]);
    gate.light();
    await until(() => c.events.includes('close'));
    expect(c.events[0]).toBe('ECONNRESET');
  });

  it('accepts connections while dark and connects them through on light', async () => {
    gate.dark('both');
    const c = await client();
    c.socket.write('late');
    await pause(200);
    expect(received.join('')).toBe('');
    gate.light();
    await until(() => c.data() === '<late>');
    c.socket.destroy();
  });
});
