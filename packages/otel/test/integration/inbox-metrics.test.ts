import {
  createInbox,
  createOutbox,
  createRelay,
  type Envelope,
  type Handler,
  type Logger,
  migrate,
  type OutboxPublisher,
  PermanentError,
} from '@once/core';
import { fingerprint, silentLogger } from '@once/core/adapter';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';
import { instrument } from '../../src/index.js';
import { histogramCount, metricsHarness, pointsOf, sumOf } from '../fixtures/telemetry.js';

// A real Inbox and Relay on a fresh schema, a real MeterProvider with a pull reader: what a
// Prometheus scrape would see after each step.

const pool = createTestPool({ max: 6 });
const schema = freshSchemaName('otel_inbox');
const inboxTable = `${schema}.inbox`;

beforeAll(async () => {
  await migrate(pool, { schema });
});
afterAll(async () => {
  await dropSchema(pool, schema);
  await pool.end();
});

let seq = 0;
function envelope(id: string, body: object): Envelope {
  return {
    id,
    body: Buffer.from(JSON.stringify(body)),
    headers: {},
    source: { broker: 'sqs', queue: 'http://127.0.0.1:9324/000000000000/payments', offset: String(++seq) },
    attempt: 1,
    redelivered: false,
  };
}

/** ok: writes nothing and returns; permanent / transient: throws so. */
const handler: Handler = (e) => {
  const { kind } = JSON.parse(e.body.toString()) as { kind: string };
  if (kind === 'permanent') throw new PermanentError('bad amount');
  if (kind === 'transient') throw Object.assign(new Error('provider timeout'), { code: 'ETIMEDOUT' });
  return kind;
};

describe('instrument(inbox)', () => {
  const h = metricsHarness();
  afterAll(() => h.shutdown());
  const inbox = createInbox({ pool, schema, consumer: 'payments', handler, maxAttempts: 3 });
  const instrumentation = instrument(inbox, { meterProvider: h.meterProvider });
  const base = {
    'once.consumer': 'payments',
    'messaging.system': 'aws_sqs',
    'messaging.destination.name': 'payments',
  };

  it('counts each outcome with its attributes, and times processing and handlers', async () => {
    const statuses = [
      await inbox.process(envelope('a', { kind: 'ok' })),
      await inbox.process(envelope('a', { kind: 'ok' })),
      await inbox.process(envelope('a', { kind: 'ok', amount: 2 })),
      await inbox.process(envelope('p', { kind: 'permanent' })),
      await inbox.process(envelope('r', { kind: 'transient' })),
      ...(await inbox.processBatch([envelope('b1', { kind: 'ok' }), envelope('b2', { kind: 'ok' })])),
    ].map((o) => o.status);
    expect(statuses).toEqual([
      'processed',
      'duplicate',
      'conflict',
      'failed',
      'retry',
      'processed',
      'processed',
    ]);

    const m = await h.collect();
    const count = (outcome: string) => sumOf(m, 'once.messages', { ...base, 'once.outcome': outcome });
    expect(count('processed')).toBe(3);
    expect(count('duplicate')).toBe(1);
    expect(count('conflict')).toBe(1);
    expect(count('failed')).toBe(1);
    expect(count('retry')).toBe(1);
    expect(sumOf(m, 'once.messages')).toBe(7);
    expect(pointsOf(m, 'once.messages', { 'once.outcome': 'failed' })[0]!.attributes).toMatchObject({
      'once.fail.reason': 'permanent',
      'error.type': 'PERMANENT',
    });
    expect(pointsOf(m, 'once.messages', { 'once.outcome': 'retry' })[0]!.attributes['error.type']).toBe(
      'ETIMEDOUT',
    );
    expect(
      pointsOf(m, 'once.messages', { 'once.outcome': 'conflict' })[0]!.attributes['once.conflict.action'],
    ).toBe('dead-letter');

    expect(m.get('once.process.duration')?.descriptor.unit).toBe('s');
    expect(histogramCount(m, 'once.process.duration', base)).toBe(7);
    // The handler ran for a, p, r, b1 and b2: duplicates and conflicts never reach it.
    expect(histogramCount(m, 'once.handler.duration', base)).toBe(5);
    expect(histogramCount(m, 'once.handler.duration', { 'error.type': 'PERMANENT' })).toBe(1);
    expect(histogramCount(m, 'once.handler.duration', { 'error.type': 'ETIMEDOUT' })).toBe(1);
    const sum = pointsOf(m, 'once.handler.duration').reduce(
      (s, p) => s + (p.value as { sum: number }).sum,
      0,
    );
    // Seconds, not milliseconds: five trivial handlers take well under a second in total.
    expect(sum).toBeLessThan(1);
  });

  it("records the semantic conventions' messaging.process.duration and messaging.client.consumed.messages too", async () => {
    const m = await h.collect();
    const semconv = {
      'messaging.system': 'aws_sqs',
      'messaging.destination.name': 'payments',
      'messaging.operation.name': 'process',
      'once.consumer': 'payments',
    };
    // The seven deliveries of the test above, each once.
    expect(m.get('messaging.client.consumed.messages')?.descriptor.unit).toBe('{message}');
    expect(sumOf(m, 'messaging.client.consumed.messages', semconv)).toBe(7);
    expect(m.get('messaging.process.duration')?.descriptor.unit).toBe('s');
    expect(histogramCount(m, 'messaging.process.duration', semconv)).toBe(7);
    // error.type if and only if the operation failed: the permanent failure and the retry.
    expect(histogramCount(m, 'messaging.process.duration', { 'error.type': 'PERMANENT' })).toBe(1);
    expect(histogramCount(m, 'messaging.process.duration', { 'error.type': 'ETIMEDOUT' })).toBe(1);
    const ok = pointsOf(m, 'messaging.client.consumed.messages').filter(
      (p) => !('error.type' in p.attributes),
    );
    expect(ok.reduce((n, p) => n + (p.value as number), 0)).toBe(5);
    // Only the conventions' attributes (and once.consumer): no once.outcome on these.
    for (const p of pointsOf(m, 'messaging.process.duration')) {
      expect(Object.keys(p.attributes).sort()).toEqual(
        Object.keys({ ...semconv, ...('error.type' in p.attributes ? { 'error.type': '' } : {}) }).sort(),
      );
    }
    // The same durations as once.process.duration, in seconds.
    const total = (name: string) =>
      pointsOf(m, name).reduce((n, p) => n + (p.value as { sum: number }).sum, 0);
    expect(total('messaging.process.duration')).toBeCloseTo(total('once.process.duration'), 9);
  });

  it('reads inbox rows and purge lag from PostgreSQL at collection time', async () => {
    await pool.query(`ANALYZE ${inboxTable}`);
    const rows = Number((await pool.query(`SELECT count(*) AS n FROM ${inboxTable}`)).rows[0].n);
    expect(rows).toBe(4); // a, p, b1, b2
    let m = await h.collect();
    expect(sumOf(m, 'once.inbox.rows', { 'once.schema': schema })).toBe(rows);
    expect(sumOf(m, 'once.inbox.purge.lag', { 'once.schema': schema })).toBe(0);
    // One row expired 90 s ago and not purged yet.
    await pool.query(
      `UPDATE ${inboxTable} SET expires_at = now() - interval '90 seconds' WHERE message_id = 'a'`,
    );
    m = await h.collect();
    const lag = sumOf(m, 'once.inbox.purge.lag', { 'once.schema': schema });
    expect(lag).toBeGreaterThanOrEqual(90);
    expect(lag).toBeLessThan(3600);
  });

  it('close() stops recording and drops the gauge callback', async () => {
    instrumentation.close();
    instrumentation.close();
    const before = await h.collect();
    const queries: string[] = [];
    // Statements on the pool's connections too: once sends its own there (bounded-pool.ts).
    const spy = {
      connect: async () => {
        const c = await pool.connect();
        return {
          query: (text: string, values?: unknown[]) => {
            queries.push(text);
            return c.query(text, values);
          },
          release: (e?: Error | boolean) => c.release(e),
          on: (e: 'error', l: (err: Error) => void) => c.on(e, l),
          off: (e: 'error', l: (err: Error) => void) => c.off(e, l),
        };
      },
      query: (text: string, values?: unknown[]) => {
        queries.push(text);
        return pool.query(text, values);
      },
    };
    const spied = createInbox({ pool: spy, schema, consumer: 'payments', handler });
    const second = instrument(spied, { meterProvider: h.meterProvider });
    second.close();
    await inbox.process(envelope('c', { kind: 'ok' }));
    const after = await h.collect();
    expect(sumOf(after, 'once.messages')).toBe(sumOf(before, 'once.messages'));
    expect(histogramCount(after, 'once.handler.duration')).toBe(
      histogramCount(before, 'once.handler.duration'),
    );
    expect(queries.filter((q) => q.includes('reltuples'))).toEqual([]);
  });
});

describe('once.inbox.rows on an inbox table PostgreSQL never analysed', () => {
  const h = metricsHarness();
  const fresh = freshSchemaName('otel_unanalysed');
  const table = `${fresh}.inbox`;
  afterAll(async () => {
    await h.shutdown();
    await dropSchema(pool, fresh);
  });

  const reltuples = async () =>
    Number(
      (await pool.query('SELECT reltuples FROM pg_class WHERE oid = to_regclass($1)', [table])).rows[0]
        .reltuples,
    );

  it('reports the rows there are, never 0, and nothing (unknown) past the counting cap', async () => {
    await migrate(pool, { schema: fresh });
    // Autovacuum would analyse the table at its own time; this test needs it never analysed.
    await pool.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
    const inbox = createInbox({ pool, schema: fresh, consumer: 'ledger', handler });
    const instrumentation = instrument(inbox, { meterProvider: h.meterProvider });
    try {
      for (const id of ['x1', 'x2', 'x3']) {
        expect((await inbox.process(envelope(id, { kind: 'ok' }))).status).toBe('processed');
      }
      const bulk = () =>
        pool.query(
          `INSERT INTO ${table} (consumer, message_id, fingerprint, status, expires_at)
           SELECT 'bulk', 'b' || g, $1, 'done', now() + interval '1 day' FROM generate_series(1, 10000) AS g`,
          [fingerprint(Buffer.from('{}'))],
        );
      // More rows than a collection counts on a table never analysed: no value, not a wrong one.
      // (First: the SDK goes on exporting a gauge's last value when a collection observes none.)
      await bulk();
      expect(await reltuples()).toBe(-1);
      let m = await h.collect();
      expect(pointsOf(m, 'once.inbox.rows', { 'once.schema': fresh })).toEqual([]);
      // The other gauge of the same read is still observed.
      expect(pointsOf(m, 'once.inbox.purge.lag', { 'once.schema': fresh })).toHaveLength(1);

      // Fewer: the rows there are (a DELETE leaves reltuples at -1).
      await pool.query(`DELETE FROM ${table} WHERE consumer = 'bulk'`);
      expect(await reltuples()).toBe(-1);
      m = await h.collect();
      expect(pointsOf(m, 'once.inbox.rows', { 'once.schema': fresh })).toHaveLength(1);
      expect(sumOf(m, 'once.inbox.rows', { 'once.schema': fresh })).toBe(3);

      // Once analysed, PostgreSQL's estimate, however many rows.
      await bulk();
      await pool.query(`ANALYZE ${table}`);
      expect(await reltuples()).toBe(10003);
      m = await h.collect();
      expect(sumOf(m, 'once.inbox.rows', { 'once.schema': fresh })).toBe(10003);
    } finally {
      instrumentation.close();
    }
  });
});

describe('a message that did not run is not-run, never a retry', () => {
  const h = metricsHarness();
  afterAll(() => h.shutdown());

  it('behind a retried message in its batch, and with the database unavailable', async () => {
    const inbox = createInbox({ pool, schema, consumer: 'ledger', handler, maxAttempts: 3 });
    const missing = createInbox({
      pool,
      schema: freshSchemaName('otel_missing'),
      consumer: 'ledger',
      handler,
      logger: silentLogger,
    });
    const instrumentations = [inbox, missing].map((i) =>
      instrument(i, { meterProvider: h.meterProvider, pool: false }),
    );
    const kafka = (id: string, kind: string): Envelope => ({
      ...envelope(id, { kind }),
      source: {
        broker: 'kafka',
        queue: 'ledger-topic',
        partition: 0,
        offset: String(++seq),
        group: 'ledger-group',
      },
    });
    const batch = await inbox.processBatch([kafka('n1', 'ok'), kafka('n2', 'transient'), kafka('n3', 'ok')]);
    expect(batch.map((o) => o.status)).toEqual(['processed', 'retry', 'not-run']);
    expect((await missing.process(kafka('n4', 'ok'))).status).toBe('not-run');
    for (const i of instrumentations) i.close();

    const m = await h.collect();
    const count = (outcome: string) => sumOf(m, 'once.messages', { 'once.outcome': outcome });
    expect(count('retry')).toBe(1);
    expect(count('not-run')).toBe(2);
    expect(sumOf(m, 'once.messages')).toBe(4);
    expect(sumOf(m, 'once.messages', { 'once.outcome': 'not-run', 'once.not_run.reason': 'behind' })).toBe(1);
    expect(
      sumOf(m, 'once.messages', { 'once.outcome': 'not-run', 'once.not_run.reason': 'unavailable' }),
    ).toBe(1);
    // Delivered to the application all the same: consumed once each, with Kafka's consumer group.
    expect(
      sumOf(m, 'messaging.client.consumed.messages', {
        'messaging.system': 'kafka',
        'messaging.destination.name': 'ledger-topic',
        'messaging.consumer.group.name': 'ledger-group',
        'messaging.operation.name': 'process',
      }),
    ).toBe(4);
    expect(histogramCount(m, 'messaging.process.duration')).toBe(4);
  });
});

describe('instrument(inbox) in lease mode', () => {
  const h = metricsHarness();
  afterAll(() => h.shutdown());
  let fail = true;
  const inbox = createInbox({
    pool,
    schema,
    consumer: 'mailer',
    mode: { lease: { leaseMs: 5_000 } },
    handler: () => {
      if (fail) throw new Error('smtp down');
    },
  });
  instrument(inbox, { meterProvider: h.meterProvider, pool: false });

  it('counts a takeover of an expired lease, not a fresh claim or a re-claim of a released id', async () => {
    // A worker died holding "stale": its row is in_progress with a lease that ran out.
    const stale = envelope('stale', { to: 'a@example.com' });
    await pool.query(
      `INSERT INTO ${inboxTable} (consumer, message_id, fingerprint, status, owner, lease_until, expires_at)
       VALUES ('mailer', 'stale', $1, 'in_progress', 'dead-worker', now() - interval '1 second', now() + interval '1 day')`,
      [fingerprint(stale.body)],
    );
    // "released": a transient failure gives the id back (owner NULL), then the retry claims it.
    expect((await inbox.process(envelope('released', { to: 'b@example.com' }))).status).toBe('retry');
    fail = false;
    expect((await inbox.process(envelope('released', { to: 'b@example.com' }))).status).toBe('processed');
    expect((await inbox.process(envelope('fresh', { to: 'c@example.com' }))).status).toBe('processed');
    expect((await inbox.process(stale)).status).toBe('processed');

    const m = await h.collect();
    expect(sumOf(m, 'once.lease.takeovers')).toBe(1);
    expect(pointsOf(m, 'once.lease.takeovers')[0]!.attributes).toMatchObject({
      'once.consumer': 'mailer',
      'messaging.destination.name': 'payments',
    });
    expect(sumOf(m, 'once.messages', { 'once.outcome': 'processed' })).toBe(3);
    // Lease-mode handler runs are timed too: released (twice), fresh, stale.
    expect(histogramCount(m, 'once.handler.duration')).toBe(4);
    // pool: false: no gauges.
    expect(m.has('once.inbox.rows')).toBe(false);
  });
});

describe('instrument(relay)', () => {
  const h = metricsHarness();
  afterAll(() => h.shutdown());

  it('counts sent, failed and parked rows, and reads pending rows and their age', async () => {
    // A publisher of core's interface (the broker side is each adapter's test): "bad" is refused.
    const publisher: OutboxPublisher = {
      publish: async (messages) =>
        messages.map((msg) =>
          msg.destination === 'bad'
            ? { id: msg.id, ok: false as const, error: { name: 'Nack', message: 'refused', code: 'NACK' } }
            : { id: msg.id, ok: true as const },
        ),
    };
    const outbox = createOutbox({ pool, schema, destinations: ['good', 'bad'] });
    for (const d of ['good', 'good', 'bad']) await outbox.enqueue(pool, d, { d });
    const relay = createRelay({
      pool,
      schema,
      publishers: { good: publisher, bad: publisher },
      maxAttempts: 2,
      retryDelayMs: () => 0,
      listen: false,
    });
    const instrumentation = instrument(relay, { meterProvider: h.meterProvider, pool, schema });

    let m = await h.collect();
    expect(sumOf(m, 'once.outbox.pending', { 'once.schema': schema })).toBe(3);
    expect(sumOf(m, 'once.outbox.lag', { 'once.schema': schema })).toBeGreaterThanOrEqual(0);

    await relay.runOnce(); // good ×2 sent, bad attempt 1 failed
    await relay.runOnce(); // bad attempt 2: parked
    m = await h.collect();
    expect(sumOf(m, 'once.outbox.messages', { 'once.outbox.result': 'sent' })).toBe(2);
    expect(pointsOf(m, 'once.outbox.messages', { 'once.outbox.result': 'failed' })[0]).toMatchObject({
      value: 1,
      attributes: { 'messaging.destination.name': 'bad', 'error.type': 'NACK' },
    });
    expect(sumOf(m, 'once.outbox.messages', { 'once.outbox.result': 'parked' })).toBe(1);
    expect(sumOf(m, 'once.outbox.pending', { 'once.schema': schema })).toBe(0);
    expect(sumOf(m, 'once.outbox.lag', { 'once.schema': schema })).toBe(0);
    instrumentation.close();
  });

  it('a gauge read that fails is logged and observes nothing; collection goes on', async () => {
    const warnings: string[] = [];
    const logger: Logger = { debug() {}, info() {}, error() {}, warn: (_f, msg) => warnings.push(msg) };
    const relay = createRelay({
      pool,
      schema,
      publishers: { x: { publish: async () => {} } },
      listen: false,
    });
    const missing = freshSchemaName('otel_missing');
    const instrumentation = instrument(relay, {
      meterProvider: h.meterProvider,
      pool,
      schema: missing,
      logger,
    });
    const m = await h.collect();
    expect(pointsOf(m, 'once.outbox.pending', { 'once.schema': missing })).toEqual([]);
    expect(warnings).toEqual(['once/otel: a gauge read failed; nothing observed']);
    instrumentation.close();
  });
});
