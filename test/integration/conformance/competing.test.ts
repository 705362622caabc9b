import { describe, expect, it } from 'vitest';
import { BROKERS } from './brokers.js';
import { type OutMessage, recordEffect, sleep, waitFor } from './harness.js';
import { messagesOf, useBroker, waitUntilDone } from './suite.js';

// Two consumers of one name on one destination at once (two members of a Kafka group, two
// pollers of a queue). Each id is also re-sent under another key, so its two copies can be held
// by both consumers at the same moment (other partitions, other message groups) and meet only at
// the claim in Postgres: one runs, the other waits for its commit and is a duplicate.

describe.each(BROKERS)('%s: competing consumers', (broker, make) => {
  const t = useBroker(`conf_compete_${broker}`, make);

  it('two consumers at once, every id sent twice: one effect per id, both consumers worked', async () => {
    const { harness, db } = t;
    const dest = await harness.create(`conf-compete-${broker}`);
    const ledger = await db.ledger();
    const record = recordEffect(ledger);
    const processed = [0, 0];
    // Deliveries each consumer settled (processed or duplicate). Which copy of an id wins the claim
    // is a race: on RabbitMQ, round-robin dispatch can hand one consumer every second copy, and it
    // may lose every race, so "worked" counts deliveries handled, not effects.
    const handled = [0, 0];
    const consumers = await Promise.all(
      [0, 1].map((n) =>
        harness.start(dest, {
          consumer: 'compete',
          handler: async (envelope, ctx) => {
            // Holding the claim a little widens the window in which the other copy arrives.
            await sleep(Math.random() * 4);
            await record(envelope, ctx);
          },
          listen: (inbox) => {
            inbox.on('message:processed', () => {
              processed[n]! += 1;
              handled[n]! += 1;
            });
            inbox.on('message:duplicate', () => {
              handled[n]! += 1;
            });
          },
        }),
      ),
    );
    // Publish only once both have their share, so neither drains the destination alone.
    await waitFor('both consumers to have a share', () => harness.balanced(dest, consumers), 60_000);

    // 16 keys: k0..k7 all hash (murmur2) to partitions 0 and 1 of Kafka's 4, and a KIP-848 group
    // hands a member partitions 2 and 3 together, which then never saw a message.
    const keys = 16;
    const originals = messagesOf(dest, 120, keys);
    const messages: OutMessage[] = originals.flatMap((m, i) => [m, { ...m, key: `k${(i + 1) % keys}` }]);
    await harness.publish(dest, messages);
    await waitUntilDone(harness, dest, 'compete', ledger, originals.length);
    for (const c of consumers) await c.stop();

    expect(await harness.settled(dest, 'compete')).toBe(true);
    const verdict = await ledger.check({ expectedIds: originals.map((m) => m.id) });
    expect(verdict.lost).toEqual([]);
    expect(verdict.duplicated).toEqual([]);
    expect(verdict.unexpected).toEqual([]);
    expect(verdict.ok).toBe(true);
    expect(processed[0]! + processed[1]!).toBe(originals.length);
    expect(handled[0]).toBeGreaterThan(0);
    expect(handled[1]).toBeGreaterThan(0);
  });
});
