import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { silentLogger } from '../../src/adapter/index.js';
import {
  AdminError,
  AdminErrorCode,
  checkSchema,
  consumerExists,
  countExpired,
  discardFailed,
  findInboxRow,
  getInboxRow,
  inboxStats,
  listFailed,
  outboxStats,
  readInboxGauges,
  readOutboxGauges,
  readSchemaState,
  readSteps,
  retryFailed,
  retryOutbox,
} from '../../src/admin/index.js';
import { createInbox, createOutbox, type Envelope, OnceError, PermanentError } from '../../src/index.js';

// The admin API against a real schema: what the CLI's tests do not reach through the command
// line (typed errors and their detail, the outbox's own checks on a republish, a caller's outbox,
// a pg client instead of a pool). The CLI's tests cover the rest through `once ...`.

let db: Awaited<ReturnType<typeof freshDb>>;
let seq = 0;

function kafkaEnvelope(id: string, body: string | Buffer = JSON.stringify({ id })): Envelope {
  seq++;
  return {
    id,
    body: Buffer.isBuffer(body) ? body : Buffer.from(body),
    headers: { traceparent: 'tp', 'x-once-attempt': '3' },
    key: 'k',
    source: { broker: 'kafka', queue: 'orders-topic', partition: 0, offset: String(seq) },
    attempt: 1,
    redelivered: false,
  };
}

/** Records `ids` as failed (permanent) for consumer `orders`, `done` for `ok`. */
async function seed(consumer: string, ids: string[], fail: boolean, body?: Buffer) {
  const inbox = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer,
    maxAttempts: 1,
    logger: silentLogger,
    handler: async () => {
      if (fail) throw new PermanentError('bad amount');
      return { ok: true };
    },
    storeResult: true,
  });
  for (const id of ids) await inbox.process(kafkaEnvelope(id, body));
}

async function adminError(p: Promise<unknown>): Promise<AdminError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!AdminError.is(err)) throw new Error(`expected an AdminError, got ${String(err)}`);
  return err;
}

const outboxRows = async () =>
  (
    await db.pool.query<{
      id: string;
      message_id: string;
      destination: string;
      key: string | null;
      body: Buffer;
    }>(`SELECT id::text, message_id, destination, key, body FROM ${db.schema}.outbox ORDER BY seq`)
  ).rows;

beforeAll(async () => {
  db = await freshDb('core_admin', 6);
  await seed('orders', ['f1', 'f2', 'f3', 'f4', 'f5', 'f6'], true);
  await seed('orders', ['big'], true, Buffer.alloc(2048, 1));
  await seed('orders', ['d1'], false);
});
afterAll(async () => {
  await db.close();
});

describe('schema state', () => {
  it('reads the version without judging it; checkSchema judges', async () => {
    expect(await readSchemaState(db.pool, db.schema)).toMatchObject({ status: 'current' });
    const missing = await readSchemaState(db.pool, `${db.schema}_none`);
    expect(missing).toMatchObject({ version: 0, status: 'not-installed' });
    await expect(checkSchema(db.pool, `${db.schema}_none`)).rejects.toMatchObject({
      code: 'SCHEMA_NOT_INSTALLED',
    });
    await expect(readSchemaState(db.pool, 'Not-An-Identifier')).rejects.toMatchObject({
      code: 'INVALID_IDENTIFIER',
    });
  });

  it('takes a pg client (inside a transaction) as well as a pool', async () => {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      expect((await readSchemaState(client, db.schema)).status).toBe('current');
      expect(await consumerExists(client, db.schema, 'orders')).toBe(true);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});

describe('stats and lookups', () => {
  it('counts per consumer and destination, typed as numbers and dates', async () => {
    const [orders] = await inboxStats(db.pool, db.schema);
    expect(orders).toMatchObject({
      consumer: 'orders',
      rows: 8,
      done: 1,
      failed: 7,
      inProgress: 0,
      expired: 0,
    });
    expect(orders?.oldestAt).toBeInstanceOf(Date);
    expect(typeof orders?.oldestAgeSeconds).toBe('number');
    expect(await outboxStats(db.pool, db.schema)).toEqual([]);
    expect(await countExpired(db.pool, db.schema)).toBe(0);
    expect(await readOutboxGauges(db.pool, db.schema, 10)).toEqual({ pending: 0, lagSeconds: null });
    const g = await readInboxGauges(db.pool, db.schema);
    expect(g.purgeLagSeconds).toBeNull();
    expect(typeof g.rowsEstimate).toBe('number');
  });

  it('finds a row with its jsonb decoded, and names what is unknown', async () => {
    const row = await findInboxRow(db.pool, db.schema, { consumer: 'orders', messageId: 'f1' });
    expect(row).toMatchObject({
      status: 'failed',
      error: { name: 'PermanentError', message: 'bad amount' },
      origin: { broker: 'kafka', queue: 'orders-topic', key: 'k' },
      owner: null,
      leaseUntil: null,
    });
    expect(row?.body?.toString()).toBe('{"id":"f1"}');
    expect((await findInboxRow(db.pool, db.schema, { consumer: 'orders', messageId: 'd1' }))?.result).toEqual(
      {
        ok: true,
      },
    );
    expect(await findInboxRow(db.pool, db.schema, { consumer: 'orders', messageId: 'zz' })).toBeUndefined();
    const unknownId = await adminError(
      getInboxRow(db.pool, db.schema, { consumer: 'orders', messageId: 'zz' }),
    );
    expect(unknownId.detail).toEqual({ code: 'UNKNOWN_MESSAGE', consumer: 'orders', messageId: 'zz' });
    expect(unknownId.schema).toBe(db.schema);
    const unknownConsumer = await adminError(
      getInboxRow(db.pool, db.schema, { consumer: 'nobody', messageId: 'f1' }),
    );
    expect(unknownConsumer.code).toBe(AdminErrorCode.UnknownConsumer);
    expect(unknownConsumer).toBeInstanceOf(OnceError);
  });

  it('lists failures with a total; an unknown consumer and a bad limit throw', async () => {
    const list = await listFailed(db.pool, db.schema, { consumer: 'orders', limit: 2 });
    expect(list.total).toBe(7);
    expect(list.failed.map((f) => f.messageId)).toHaveLength(2);
    expect(list.failed[0]).toMatchObject({ consumer: 'orders', attempts: 1, bodyTruncated: false });
    expect((await adminError(listFailed(db.pool, db.schema, { consumer: 'nobody' }))).detail.code).toBe(
      'UNKNOWN_CONSUMER',
    );
    await expect(listFailed(db.pool, db.schema, { limit: 0 })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
  });
});

describe('retryFailed', () => {
  const key = (messageId: string) => ({ consumer: 'orders', messageId });

  it('a republish goes through the outbox checks: too big for the outbox, refused, nothing changed', async () => {
    const outbox = createOutbox({
      pool: db.pool,
      schema: db.schema,
      destinations: { 'orders-topic': { maxBodyBytes: 1024 } },
    });
    await expect(
      retryFailed(db.pool, db.schema, key('big'), { republish: { outbox } }),
    ).rejects.toMatchObject({
      code: 'OUTBOX_INVALID',
      message: expect.stringContaining('exceeds 1024 bytes'),
    });
    // A destination the application's outbox does not know.
    await expect(
      retryFailed(db.pool, db.schema, key('f1'), { republish: { outbox, destination: 'elsewhere' } }),
    ).rejects.toMatchObject({
      code: 'OUTBOX_INVALID',
      message: expect.stringContaining('unknown destination'),
    });
    // Without an outbox of the caller's: an empty key is refused as by any enqueue.
    await expect(
      retryFailed(db.pool, db.schema, key('f1'), { republish: { key: '' } }),
    ).rejects.toMatchObject({
      code: 'OUTBOX_INVALID',
    });
    expect((await findInboxRow(db.pool, db.schema, key('big')))?.status).toBe('failed');
    expect((await findInboxRow(db.pool, db.schema, key('f1')))?.status).toBe('failed');
    expect(await outboxRows()).toEqual([]);
  });

  it('republishes under the message id, with the message headers, in the transaction that deletes the record', async () => {
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['orders-topic'] });
    const saved: (Buffer | null)[] = [];
    const r = await retryFailed(db.pool, db.schema, key('f2'), {
      republish: { outbox },
      save: ({ body }) => {
        saved.push(body);
      },
    });
    expect(r.republished).toMatchObject({ destination: 'orders-topic', key: 'k', messageId: 'f2' });
    expect(r.republished?.outboxRowId).toMatch(/^[0-9a-f-]{36}$/);
    expect(saved.map((b) => b?.toString())).toEqual(['{"id":"f2"}']);
    const rows = await outboxRows();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: r.republished?.outboxRowId, message_id: 'f2', key: 'k' });
    const headers = (await db.pool.query(`SELECT headers FROM ${db.schema}.outbox`)).rows[0].headers;
    // The delivery's own headers (x-once-*) stay behind.
    expect(headers).toEqual({ traceparent: 'tp' });
    expect(await findInboxRow(db.pool, db.schema, key('f2'))).toBeUndefined();
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
  });

  it('a save that throws leaves the record, and nothing is enqueued', async () => {
    await expect(
      retryFailed(db.pool, db.schema, key('f3'), {
        republish: {},
        save: () => {
          throw new Error('disk full');
        },
      }),
    ).rejects.toThrow('disk full');
    expect((await findInboxRow(db.pool, db.schema, key('f3')))?.status).toBe('failed');
    expect(await outboxRows()).toEqual([]);
  });

  it('typed refusals: recorded steps, no destination, not failed, unknown id', async () => {
    await db.pool.query(
      `INSERT INTO ${db.schema}.steps (consumer, message_id, step, seq, attempt, result) VALUES ('orders', 'f4', 'charge', 1, 1, '{"n":1}'),
        ('billing', 'f4', 'charge', 1, 1, NULL), ('orders', 'f4x', 'charge', 1, 1, NULL)`,
    );
    expect((await readSteps(db.pool, db.schema, key('f4')))[0]).toMatchObject({
      step: 'charge',
      result: { n: 1 },
    });
    const steps = await adminError(retryFailed(db.pool, db.schema, key('f4')));
    expect(steps.detail).toEqual({
      code: 'HAS_STEPS',
      consumer: 'orders',
      messageId: 'f4',
      steps: ['charge'],
    });
    expect((await retryFailed(db.pool, db.schema, key('f4'), { forgetSteps: true })).body?.toString()).toBe(
      '{"id":"f4"}',
    );
    expect(await readSteps(db.pool, db.schema, key('f4'))).toEqual([]);
    // Only the deleted message's steps went with it.
    const others = await db.pool.query(
      `SELECT consumer, message_id FROM ${db.schema}.steps WHERE message_id LIKE 'f4%' ORDER BY 1, 2`,
    );
    expect(others.rows).toEqual([
      { consumer: 'billing', message_id: 'f4' },
      { consumer: 'orders', message_id: 'f4x' },
    ]);

    await db.pool.query(
      `UPDATE ${db.schema}.inbox SET origin = origin || '{"broker":"rabbitmq"}' WHERE message_id = 'f5'`,
    );
    const noDest = await adminError(retryFailed(db.pool, db.schema, key('f5'), { republish: {} }));
    expect(noDest.detail).toMatchObject({
      code: 'NO_DESTINATION',
      origin: { broker: 'rabbitmq', queue: 'orders-topic' },
    });

    const done = await adminError(retryFailed(db.pool, db.schema, key('d1')));
    expect(done.detail).toEqual({ code: 'NOT_FAILED', consumer: 'orders', messageId: 'd1', status: 'done' });
    expect((await adminError(retryFailed(db.pool, db.schema, key('zz')))).code).toBe('UNKNOWN_MESSAGE');
  });
});

describe('discardFailed and retryOutbox', () => {
  it('discard turns a failure into done; twice is NOT_FAILED', async () => {
    await discardFailed(db.pool, db.schema, { consumer: 'orders', messageId: 'f6' });
    expect((await findInboxRow(db.pool, db.schema, { consumer: 'orders', messageId: 'f6' }))?.status).toBe(
      'done',
    );
    const twice = await adminError(
      discardFailed(db.pool, db.schema, { consumer: 'orders', messageId: 'f6' }),
    );
    expect(twice.detail).toMatchObject({ code: 'NOT_FAILED', status: 'done' });
  });

  it('retries a parked row by message id; typed refusals for a pending row and an unknown id', async () => {
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['d'] });
    await outbox.enqueue(db.pool, 'd', 'x', { messageId: 'parked-1' });
    await outbox.enqueue(db.pool, 'd', 'y', { messageId: 'pending-1' });
    await db.pool.query(
      `UPDATE ${db.schema}.outbox SET status = 'failed', attempts = 10 WHERE message_id = 'parked-1'`,
    );
    expect((await outboxStats(db.pool, db.schema))[0]).toMatchObject({
      destination: 'd',
      pending: 1,
      failed: 1,
    });
    expect(await retryOutbox(db.pool, db.schema, { id: 'parked-1' })).toBe(1);
    const pending = await adminError(retryOutbox(db.pool, db.schema, { id: 'pending-1' }));
    expect(pending.detail).toEqual({ code: 'OUTBOX_NOT_FAILED', id: 'pending-1', status: 'pending' });
    const unknown = await adminError(retryOutbox(db.pool, db.schema, { id: 'nope' }));
    expect(unknown.detail).toEqual({ code: 'UNKNOWN_OUTBOX_ID', id: 'nope' });
    expect(await retryOutbox(db.pool, db.schema, { allFailed: true })).toBe(0);
    const gauges = await readOutboxGauges(db.pool, db.schema, 1);
    expect(gauges.pending).toBe(1); // counted up to the limit
    expect(typeof gauges.lagSeconds).toBe('number');
  });
});
