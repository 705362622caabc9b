import { PermanentError } from '@once/core';
import { describe, expect, it } from 'vitest';
import { BROKERS } from './brokers.js';
import { recordEffect } from './harness.js';
import { messagesOf, useBroker, waitUntilDone } from './suite.js';

// A message the handler can never process (PermanentError) goes to the dead-letter destination
// with its id, its own writes rolled back; the messages around it, of its key too, get their effects.

describe.each(BROKERS)('%s: poison messages', (broker, make) => {
  const t = useBroker(`conf_poison_${broker}`, make);

  it('a PermanentError for one id: it is dead-lettered with its id, the others get their effects', async () => {
    const { harness, db } = t;
    const dest = await harness.create(`conf-poison-${broker}`);
    const ledger = await db.ledger();
    const messages = messagesOf(dest, 30, 3);
    const poison = messages[10]!.id;
    await harness.publish(dest, messages);

    const record = recordEffect(ledger);
    const consumer = await harness.start(dest, {
      consumer: 'poison',
      handler: async (envelope, ctx) => {
        // The effect is written first: it must roll back with the failure.
        await record(envelope, ctx);
        if (ctx.id === poison) throw new PermanentError(`message ${poison} is malformed`);
      },
    });
    const good = messages.filter((m) => m.id !== poison).map((m) => m.id);
    await waitUntilDone(harness, dest, 'poison', ledger, good.length);
    await consumer.stop();

    expect(await harness.settled(dest, 'poison')).toBe(true);
    const verdict = await ledger.check({ expectedIds: good, checkOrderPerKey: true });
    expect(verdict.lost).toEqual([]);
    expect(verdict.duplicated).toEqual([]);
    expect(verdict.unexpected).toEqual([]); // the poison's effect rolled back
    expect(verdict.ok).toBe(true);
    expect(await harness.deadLetters(dest, 1)).toEqual([{ id: poison, reason: 'permanent' }]);
  });
});
