import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { retryFailed } from '../../src/admin/index.js';
import {
  createInbox,
  createOutbox,
  createRelay,
  type OutboxMessage,
  type OutboxPublisher,
  type OutboxPublishResult,
  PermanentError,
} from '../../src/index.js';
import { envelope } from './fixtures/db.js';

// The relay's side of a republish (schema version 10): the row's mark reaches the publisher, and
// a broker that cannot take a message yet (a republish inside its dedup window, reported with
// retryAfterMs) leaves the row pending until then without counting an attempt, never parking it.
// The brokers' side is tested per broker (test/integration/republish-*.test.ts).

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('relay_republish', 8);
});
afterAll(async () => {
  await db.close();
});

const rows = async () =>
  (
    await db.pool.query<{
      message_id: string | null;
      status: string;
      attempts: number;
      wait_ms: number;
      code: string | null;
    }>(
      `SELECT message_id, status, attempts,
         round(extract(epoch FROM available_at - now()) * 1000)::int AS wait_ms, last_error->>'code' AS code
       FROM ${db.schema}.outbox ORDER BY seq`,
    )
  ).rows;

it('a republished row reaches the publisher marked, with the deduplication id it was enqueued with; others do not', async () => {
  const inbox = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'mark',
    handler: async () => {
      throw new PermanentError('no');
    },
  });
  const fifo = 'http://127.0.0.1:9324/000000000000/mark.fifo';
  await inbox.process(
    envelope('mark-1', {
      key: 'g',
      source: { broker: 'sqs', queue: fifo, group: 'g', idFrom: 'header' },
    }),
  );
  const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: [fifo] });
  const retried = await retryFailed(
    db.pool,
    db.schema,
    { consumer: 'mark', messageId: 'mark-1' },
    {
      republish: { outbox },
    },
  );
  expect(retried.republished).toMatchObject({ destination: fifo, key: 'g', dedup: 'fresh-deduplication-id' });
  await outbox.enqueue(db.pool, fifo, 'plain', { key: 'h', messageId: 'plain-1' });
  const seen: OutboxMessage[] = [];
  await createRelay({
    pool: db.pool,
    schema: db.schema,
    listen: false,
    publishers: {
      [fifo]: {
        async publish(messages) {
          seen.push(...messages);
        },
      },
    },
  }).runOnce();
  const byId = new Map(seen.map((m) => [m.id, m]));
  const stored = await db.pool.query(
    `SELECT republish_dedup_id FROM ${db.schema}.outbox WHERE message_id = 'mark-1'`,
  );
  const dedupId = stored.rows[0].republish_dedup_id as string;
  expect(dedupId).toMatch(/^[0-9a-f-]{36}$/);
  expect(byId.get('mark-1')?.republish).toEqual({ deduplicationId: dedupId });
  expect(byId.get('plain-1')).toBeDefined();
  expect(byId.get('plain-1')?.republish).toBeUndefined();
  await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
});

it('retryAfterMs leaves the row pending until then, attempts unchanged, never parked; later rows of its key wait, other keys go', async () => {
  const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['d'] });
  await outbox.enqueue(db.pool, 'd', 'held', { key: 'k', messageId: 'held-1' });
  await outbox.enqueue(db.pool, 'd', 'after', { key: 'k', messageId: 'after-1' });
  await outbox.enqueue(db.pool, 'd', 'other', { key: 'j', messageId: 'other-1' });
  // One attempt short of parking: a counted failure now would park it.
  await db.pool.query(`UPDATE ${db.schema}.outbox SET attempts = 2 WHERE message_id = 'held-1'`);
  const WAIT_MS = 600_000;
  let hold = true;
  const sent: string[] = [];
  const publisher: OutboxPublisher = {
    async publish(messages) {
      return messages.map((m): OutboxPublishResult => {
        if (m.id === 'held-1' && hold) {
          return {
            id: m.id,
            ok: false,
            retryable: true,
            retryAfterMs: WAIT_MS,
            error: Object.assign(new Error('not yet'), { code: 'DEDUP_WINDOW' }),
          };
        }
        sent.push(m.id);
        return { id: m.id, ok: true };
      });
    },
  };
  const relay = createRelay({
    pool: db.pool,
    schema: db.schema,
    listen: false,
    maxAttempts: 3,
    publishers: { d: publisher },
  });
  const failedEvents: { id: string; attempts: number }[] = [];
  relay.on('outbox:publish-failed', (e) => failedEvents.push({ id: e.id, attempts: e.attempts }));
  expect(await relay.runOnce()).toBe(2); // held-1 and other-1: after-1 is behind held-1
  expect(await relay.runOnce()).toBe(0); // held-1 waits, and after-1 behind it
  const [held, after, other] = await rows();
  expect(held).toMatchObject({ message_id: 'held-1', status: 'pending', attempts: 2, code: 'DEDUP_WINDOW' });
  // Due about WAIT_MS from now (the database's clock), not after retryDelayMs.
  expect(held!.wait_ms).toBeGreaterThan(WAIT_MS - 60_000);
  expect(held!.wait_ms).toBeLessThanOrEqual(WAIT_MS);
  expect(after).toMatchObject({ message_id: 'after-1', status: 'pending', attempts: 0 });
  expect(other).toMatchObject({ message_id: 'other-1', status: 'sent' });
  expect(failedEvents).toEqual([{ id: 'held-1', attempts: 2 }]);
  expect(relay.health()).toMatchObject({ parked: 0, lastError: undefined });

  // The window has passed: it goes, then the row behind it.
  await db.pool.query(`UPDATE ${db.schema}.outbox SET available_at = now() WHERE message_id = 'held-1'`);
  hold = false;
  await relay.runOnce();
  await relay.runOnce();
  expect(sent).toEqual(['other-1', 'held-1', 'after-1']);
  expect((await rows()).map((r) => [r.message_id, r.status, r.attempts])).toEqual([
    ['held-1', 'sent', 3],
    ['after-1', 'sent', 1],
    ['other-1', 'sent', 1],
  ]);
});
