import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { retryOutbox } from '../../src/admin/index.js';
import { createOutbox, createRelay, migrate, type OutboxMessage, type Relay } from '../../src/index.js';
import { outboxChannel } from '../../src/sql/outbox.js';
import { makePool } from './fixtures/db.js';

// A schema name of 63 characters, PostgreSQL's limit. `once_outbox_<schema>` would be 75 bytes:
// LISTEN would truncate it and pg_notify refuse it, so relays would only ever wake on their poll.
// The relay here polls once every 10 minutes: a send within seconds came from the notification.

const pool = makePool(6);
const schema = `chan_${randomBytes(4).toString('hex')}_`.padEnd(63, 'x');
const POLL_MS = 600_000;
let relay: Relay | undefined;

beforeAll(async () => {
  expect(schema).toHaveLength(63);
  await migrate(pool, { schema });
});
afterAll(async () => {
  await relay?.stop();
  await pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => {});
  await pool.end();
});

// Every wait is far shorter than the relay's poll interval (POLL_MS, 10 minutes): a row published
// within it was published because the NOTIFY woke the relay, however slow a busy machine is.
async function until(what: string, ok: () => boolean, ms = 30_000): Promise<void> {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

it('with a 63-character schema name, NOTIFY wakes the relay (from Outbox.wake and from the admin API)', {
  timeout: 150_000,
}, async () => {
  expect(Buffer.byteLength(outboxChannel(schema))).toBeLessThanOrEqual(63);
  const sent: OutboxMessage[] = [];
  let refuse = false;
  relay = createRelay({
    pool,
    schema,
    pollIntervalMs: POLL_MS,
    publishers: {
      d: {
        async publish(messages) {
          if (refuse)
            return messages.map((m) => ({
              id: m.id,
              ok: false as const,
              error: new Error('no'),
              retryable: false,
            }));
          sent.push(...messages);
        },
      },
    },
  });
  await relay.start();
  // The first round runs at start; after it the relay sleeps for POLL_MS unless notified.
  await until('the first round', () => relay?.health().lastRoundAt !== undefined);
  expect(relay.health().listening).toBe(true);

  const outbox = createOutbox({ pool, schema, destinations: ['d'], notifyDebounceMs: 0 });
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await outbox.enqueue(client, 'd', 'one', { messageId: 'm1' });
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  outbox.wake();
  await until('the relay to publish m1', () => sent.length === 1);
  expect(sent[0]?.id).toBe('m1');

  // A row parked by the publisher, then put back by the admin API, which notifies the same channel.
  refuse = true;
  await outbox.enqueue(pool, 'd', 'two', { messageId: 'm2' });
  outbox.wake();
  await until('m2 to be parked', () => (relay?.health().parked ?? 0) === 1);
  refuse = false;
  expect(await retryOutbox(pool, schema, { id: 'm2' })).toBe(1);
  await until('the relay to publish m2', () => sent.length === 2);
  expect(sent[1]?.id).toBe('m2');
});
