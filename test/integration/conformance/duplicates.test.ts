import { describe, expect, it } from 'vitest';
import { BROKERS } from './brokers.js';
import { type OutMessage, recordEffect } from './harness.js';
import { messagesOf, useBroker, waitUntilDone } from './suite.js';

// Producers retry, relays re-send: the same id arrives several times, here within one burst so
// the copies share a kafkajs batch, an SQS receive or a prefetch window. One effect per id.

describe.each(BROKERS)('%s: duplicates in a batch', (broker, make) => {
  const t = useBroker(`conf_dup_${broker}`, make);

  it('the same id three times in one burst, same body: one effect per id', async () => {
    const { harness, db } = t;
    const dest = await harness.create(`conf-dup-${broker}`);
    const ledger = await db.ledger();
    const originals = messagesOf(dest, 30, 4);
    const burst: OutMessage[] = [];
    originals.forEach((m, i) => {
      // A copy right behind the original, and a third one later, after other messages of its key.
      burst.push(m, m);
      if (i >= 3) burst.push(originals[i - 3]!);
    });
    burst.push(...originals.slice(-3));
    await harness.publish(dest, burst);

    let duplicates = 0;
    const consumer = await harness.start(dest, {
      consumer: 'dup',
      handler: recordEffect(ledger),
      listen: (inbox) => inbox.on('message:duplicate', () => duplicates++),
    });
    await waitUntilDone(harness, dest, 'dup', ledger, originals.length);
    await consumer.stop();

    expect(await harness.settled(dest, 'dup')).toBe(true);
    const verdict = await ledger.check({ expectedIds: originals.map((m) => m.id) });
    expect(verdict.lost).toEqual([]);
    expect(verdict.duplicated).toEqual([]);
    expect(verdict.unexpected).toEqual([]);
    expect(verdict.ok).toBe(true);
    // Every copy reached the adapter and was recognised there: the broker hid none of them.
    expect(duplicates).toBeGreaterThanOrEqual(burst.length - originals.length);
  });
});
