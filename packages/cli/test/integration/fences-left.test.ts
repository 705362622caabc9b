import { afterAll, beforeAll, expect, it } from 'vitest';
import { quoteIdent } from '../../../../test/support/index.js';
import { cli, envelope, freshOnce } from './fixtures/cli.js';

// Offset fencing was removed (issue #28) with no migration: the `fences` table of migrations 4 and
// 7 stays. A database an earlier version fenced on keeps its fence rows; this version's inbox, the
// CLI's status and purge must work on it and leave those rows alone.

let db: Awaited<ReturnType<typeof freshOnce>>;

beforeAll(async () => {
  db = await freshOnce('cli_fences_left');
  const q = quoteIdent(db.schema);
  // Rows as an earlier version wrote them: one with the last message's id and fingerprint
  // (migration 7), one from before migration 7.
  await db.pool.query(
    `INSERT INTO ${q}.fences (consumer, stream, partition, next_offset, last_id, last_fingerprint)
     VALUES ('orders', 'orders-topic', 0, 42, 'order-41', '\\x00'::bytea), ('orders', 'orders-topic', 1, 7, NULL, NULL)`,
  );
  // An expired processed row, for purge to remove.
  await db.pool.query(
    `INSERT INTO ${q}.inbox (consumer, message_id, fingerprint, status, expires_at)
     VALUES ('orders', 'old-1', '\\x00'::bytea, 'done', now() - interval '1 minute')`,
  );
});
afterAll(async () => {
  await db.close();
});

it('an inbox, once status and once purge work on a schema with fence rows, and leave them', async () => {
  // The fence is not consulted any more: the inbox row is the claim, and a redelivery a duplicate.
  const first = await db.process('orders', async () => 'ok', [envelope('order-3')]);
  expect(first.map((o) => o.status)).toEqual(['processed']);
  const again = await db.process('orders', async () => 'ok', [envelope('order-3')]);
  expect(again.map((o) => o.status)).toEqual(['duplicate']);

  const status = await cli(['--json', '--schema', db.schema, 'status']);
  expect(status.code).toBe(0);
  expect(status.json()).toMatchObject({ status: 'current', upToDate: true });

  const purge = await cli(['--schema', db.schema, 'purge']);
  expect(purge.code).toBe(0);
  expect(purge.stdout.trim()).toBe(`purged 1 expired row from schema ${db.schema}`);

  const q = quoteIdent(db.schema);
  const inbox = await db.pool.query<{ message_id: string }>(
    `SELECT message_id FROM ${q}.inbox ORDER BY message_id`,
  );
  expect(inbox.rows.map((r) => r.message_id)).toEqual(['order-3']);
  const fences = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q}.fences`);
  expect(fences.rows[0]?.n).toBe(2);
});
