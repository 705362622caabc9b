import { describe, expect, it } from 'vitest';
import { decodeProcAddress, listeningAddresses } from '../support/containers.js';

// The container harness judges "listens on loopback only" from /proc/net/tcp{,6}; a decoder that
// misread addresses would let a port on 0.0.0.0 pass as 127.0.0.1.
describe('decodeProcAddress', () => {
  it('reads IPv4 words in host byte order', () => {
    expect(decodeProcAddress('0100007F')).toBe('127.0.0.1');
    expect(decodeProcAddress('00000000')).toBe('0.0.0.0');
    // Four different bytes, so a reversed word would read 3.2.1.127.
    expect(decodeProcAddress('0302017F')).toBe('127.1.2.3');
  });

  it('reads IPv6 addresses, mapped IPv4 included', () => {
    expect(decodeProcAddress('00000000000000000000000000000000')).toBe('::');
    expect(decodeProcAddress('00000000000000000000000001000000')).toBe('::1');
    expect(decodeProcAddress('0000000000000000FFFF00000100007F')).toBe('::ffff:127.0.0.1');
    expect(decodeProcAddress('0000000000000000FFFF00000302017F')).toBe('::ffff:127.1.2.3');
    expect(decodeProcAddress('000080FE00000000FF000002FE030004')).toBe('fe80::200:ff:400:3fe');
  });
});

describe('listeningAddresses', () => {
  it('finds a listening socket of this process by its port', async () => {
    const net = await import('node:net');
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      expect(listeningAddresses(port)).toEqual(['127.0.0.1']);
    } finally {
      server.close();
    }
  });
});
