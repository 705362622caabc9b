import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, serviceUrls } from '../../../../test/support/index.js';
import { NATS_LIVENESS, ownConnectOptions } from '../../src/liveness.js';

// The connections once opens ping the server every 10 s and take two unanswered pings for a
// stale connection: a path that goes dark (no RST, no FIN) is noticed by the pings, which TCP
// alone would not do for minutes.
let proxy: FaultProxy;
beforeAll(async () => {
  const u = new URL(serviceUrls().natsUrl);
  proxy = await FaultProxy.start({ host: u.hostname, port: Number(u.port || 4222) });
});
afterAll(async () => {
  proxy.light();
  await proxy.close();
});

describe('NATS liveness', () => {
  it('a connection once opens carries its ping settings', async () => {
    const nc = await connect(ownConnectOptions([serviceUrls().natsUrl], 'once:liveness'));
    try {
      const options = (nc as unknown as { options: Record<string, unknown> }).options;
      expect(options).toMatchObject({ pingInterval: 10_000, maxPingOut: 2, timeout: 10_000 });
      expect(NATS_LIVENESS).toEqual({ pingInterval: 10_000, maxPingOut: 2, timeout: 10_000 });
    } finally {
      await nc.close();
    }
  });

  it('a dark path is reported stale by the pings (shortened here), and the client reconnects after it heals', async () => {
    const nc = await connect({
      ...ownConnectOptions([proxy.address], 'once:liveness-dark'),
      // The same mechanism as the defaults, faster.
      pingInterval: 200,
    });
    try {
      const seen: string[] = [];
      const watching = (async () => {
        for await (const s of nc.status()) {
          seen.push(s.type);
          if (s.type === 'staleConnection') proxy.light();
          if (s.type === 'reconnect') return;
        }
      })();
      proxy.dark('both');
      await watching;
      expect(seen).toContain('staleConnection');
      await nc.flush();
    } finally {
      proxy.light();
      await nc.close();
    }
  });
});
