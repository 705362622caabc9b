import { describe, expect, it } from 'vitest';
import { BROKERS } from './brokers.js';
import { recordEffect } from './harness.js';
import { messagesOf, useBroker, waitUntilDone } from './suite.js';

// Issue #29 item 1: a handler that throws is seen when it throws, not 70 s later when its message
// is dead-lettered. With a pino-shaped logger (fields first, then the message), each failed run of
// the message's own is one warn line with the consumer, the id, the attempt of the budget, the
// error and what happens next (the same error of the same message at most once a minute); the
// dead-letter line carries the error too. The messages around
// it are untouched.

interface Line {
  level: string;
  fields: Record<string, unknown>;
  msg: string;
}

function pinoShaped() {
  const lines: Line[] = [];
  const at = (level: string) => (fields: object, msg?: string) =>
    void lines.push({ level, fields: fields as Record<string, unknown>, msg: msg ?? '' });
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

describe.each(BROKERS)('%s: a failing handler is visible', (broker, make) => {
  const t = useBroker(`conf_visible_${broker}`, make);

  it('each failed run logs one warn line with attempt of max, the error and the next step; the dead letter carries the error', async () => {
    const { harness, db } = t;
    const dest = await harness.create(`conf-visible-${broker}`);
    const ledger = await db.ledger();
    const messages = messagesOf(dest, 12, 3);
    const bad = messages[4]!.id;
    await harness.publish(dest, messages);

    const { lines, logger } = pinoShaped();
    const record = recordEffect(ledger);
    const consumer = await harness.start(dest, {
      consumer: 'visible',
      options: { maxAttempts: 3, retryDelayMs: 200, logger },
      handler: async (envelope, ctx) => {
        if (ctx.id === bad) {
          // A typo in a column name: PostgreSQL's 42703, thrown from the handler's own statement.
          await ctx.tx.query('SELECT amout FROM (SELECT 1 AS amount) t');
        }
        await record(envelope, ctx);
      },
    });
    const good = messages.filter((m) => m.id !== bad).map((m) => m.id);
    await waitUntilDone(harness, dest, 'visible', ledger, good.length);
    expect(await harness.deadLetters(dest, 1)).toEqual([{ id: bad, reason: 'max-attempts' }]);
    await consumer.stop();

    // Attempts 1 and 2 failed with the same error within a minute: the second is a repeat, left
    // out (the next line of it would say how many were).
    const failed = lines.filter((l) => /: handler failed$/.test(l.msg) && l.fields.id === bad);
    expect(failed.map((l) => l.level)).toEqual(['warn']);
    expect(failed.map((l) => l.fields.attempt)).toEqual(['1 of 3']);
    for (const l of failed) {
      expect(l.fields).toMatchObject({
        consumer: 'visible',
        error: expect.stringContaining('column "amout" does not exist'),
        code: '42703',
        next: expect.stringMatching(/^retry in \d+ ms$/),
      });
    }
    // (Kafka adds a debug line of its own, with the dead-letter topic's partition and offset.)
    const dead = lines.filter((l) => l.level !== 'debug' && /message dead-lettered$/.test(l.msg));
    expect(dead, JSON.stringify(dead)).toHaveLength(1);
    expect(dead[0]).toMatchObject({
      level: 'warn',
      fields: {
        consumer: 'visible',
        id: bad,
        reason: 'max-attempts',
        attempt: '3 of 3',
        error: expect.stringContaining('column "amout" does not exist'),
        code: '42703',
      },
    });
    // Nothing about the good messages, and no outage episode.
    expect(lines.filter((l) => l.fields.id !== undefined && l.fields.id !== bad)).toEqual([]);
    expect(lines.filter((l) => /database unavailable/.test(l.msg))).toEqual([]);
    const verdict = await ledger.check({ expectedIds: good, checkOrderPerKey: true });
    expect(verdict.ok).toBe(true);
  });
});
