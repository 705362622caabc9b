import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { untilAborted } from '../../src/adapter/index.js';
import { createOutbox, createRelay, migrate } from '../../src/index.js';
import { makePool } from './fixtures/db.js';

// A publisher that waits on the round's signal once per message (as the RabbitMQ and NATS
// publishers do, each removing its listener when done) puts up to batchSize listeners on one
// AbortSignal. That is expected, and must not print Node's MaxListenersExceededWarning, which
// the demo printed dozens of times before the relay raised the signal's limit.

const pool = makePool(4);
const schema = `relay_listeners_${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  await migrate(pool, { schema });
});
afterAll(async () => {
  await pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => {});
  await pool.end();
});

it('a round of 50 messages, each awaited against the signal, warns of no listener leak', {
  timeout: 60_000,
}, async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  const relay = createRelay({
    pool,
    schema,
    listen: false,
    pollIntervalMs: 50,
    publishers: {
      d: {
        publish: async (messages, options) => {
          await Promise.all(
            messages.map((_, i) =>
              untilAborted(new Promise((r) => setTimeout(r, 5 + (i % 7))), options?.signal),
            ),
          );
        },
      },
    },
  });
  try {
    const outbox = createOutbox({ pool, schema, destinations: ['d'] });
    for (let i = 0; i < 50; i++) await outbox.enqueue(pool, 'd', `body ${i}`, { messageId: `m${i}` });
    await relay.start();
    const t0 = Date.now();
    while (relay.health().published < 50) {
      if (Date.now() - t0 > 30_000) throw new Error(`published ${relay.health().published} of 50`);
      await new Promise((r) => setTimeout(r, 20));
    }
    // Warnings are emitted on the next tick.
    await new Promise((r) => setImmediate(r));
  } finally {
    await relay.stop();
    process.off('warning', onWarning);
  }
  expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
});
