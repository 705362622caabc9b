import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createOutbox, createRelay, migrate, type OutboxMessage } from '../../src/index.js';
import { makePool } from './fixtures/db.js';

// stop() while a round is publishing: the round is abandoned and the relay's loop ends. It used
// to go on to sleep one full poll interval (ten minutes here) before seeing that it was stopped,
// so stop() hung that long.

const pool = makePool(4);
const schema = `relay_stop_${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  await migrate(pool, { schema });
});
afterAll(async () => {
  await pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => {});
  await pool.end();
});

it('stop() during a round returns without waiting out the poll interval', { timeout: 60_000 }, async () => {
  const calls: OutboxMessage[][] = [];
  let release: (() => void) | undefined;
  const relay = createRelay({
    pool,
    schema,
    listen: false,
    pollIntervalMs: 600_000,
    publishers: {
      d: {
        // Holds the round until released (or abandoned by stop()).
        publish: (messages) =>
          new Promise<void>((resolve) => {
            calls.push([...messages]);
            release = resolve;
          }),
      },
    },
  });
  const outbox = createOutbox({ pool, schema, destinations: ['d'] });
  await outbox.enqueue(pool, 'd', 'one', { messageId: 'm1' });
  await relay.start();
  const t0 = Date.now();
  while (calls.length === 0) {
    if (Date.now() - t0 > 20_000) throw new Error('the relay never published');
    await new Promise((r) => setTimeout(r, 20));
  }
  const outcome = await Promise.race([
    relay.stop().then(() => 'stopped'),
    new Promise((r) => setTimeout(() => r('still stopping after 20 s'), 20_000)),
  ]);
  release?.();
  expect(outcome).toBe('stopped');
  expect(relay.health().running).toBe(false);
  // Abandoned, not lost: the row is still pending for the next relay.
  const { rows } = await pool.query(`SELECT status FROM "${schema}".outbox`);
  expect(rows).toEqual([{ status: 'pending' }]);
});
