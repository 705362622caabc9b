import { createInbox, type Envelope, type Handler, migrateDatabases } from '@once/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabases, type TestDatabases } from '../../../../test/support/index.js';
import { instrument } from '../../src/index.js';
import { metricsHarness, pointsOf, sumOf } from '../fixtures/telemetry.js';

// An inbox over two real databases: each message's metrics carry the database it was routed
// to as db.namespace, and the database gauges are read from each database, tagged the same way.

let dbs: TestDatabases;
beforeAll(async () => {
  dbs = await createDatabases('otel', 2);
  await migrateDatabases({ eu: dbs.pool(0), us: dbs.pool(1) });
}, 60_000);
afterAll(async () => {
  await dbs.drop();
});

let seq = 0;
function envelope(id: string, tenant: string): Envelope {
  return {
    id,
    body: Buffer.from('{}'),
    headers: { tenant },
    source: { broker: 'kafka', queue: 'orders', partition: 0, offset: String(++seq) },
    attempt: 1,
    redelivered: false,
  };
}
const handler: Handler = async () => {};

describe('instrument(inbox) over several databases', () => {
  const h = metricsHarness();
  afterAll(() => h.shutdown());

  it('per-message metrics and gauges carry db.namespace; an unroutable message carries none', async () => {
    const inbox = createInbox({
      databases: { eu: dbs.pool(0), us: dbs.pool(1) },
      route: (e) => e.headers.tenant as string,
      consumer: 'orders',
      handler,
      logger: false,
    });
    const instrumentation = instrument(inbox, { meterProvider: h.meterProvider });
    const got = await inbox.processBatch([
      envelope('e1', 'eu'),
      envelope('u1', 'us'),
      envelope('u2', 'us'),
      envelope('x1', 'mars'),
    ]);
    expect(got.map((o) => o.status)).toEqual(['processed', 'processed', 'processed', 'failed']);
    await inbox.process(envelope('u1', 'us'));
    const m = await h.collect();
    expect(sumOf(m, 'once.messages', { 'once.outcome': 'processed', 'db.namespace': 'eu' })).toBe(1);
    expect(sumOf(m, 'once.messages', { 'once.outcome': 'processed', 'db.namespace': 'us' })).toBe(2);
    expect(sumOf(m, 'once.messages', { 'once.outcome': 'duplicate', 'db.namespace': 'us' })).toBe(1);
    const failed = pointsOf(m, 'once.messages', { 'once.outcome': 'failed' });
    expect(failed).toHaveLength(1);
    expect(failed[0]!.attributes).toMatchObject({ 'once.fail.reason': 'unroutable' });
    expect(failed[0]!.attributes['db.namespace']).toBeUndefined();
    // The gauges: one point per database.
    for (const [i, name] of [
      [0, 'eu'],
      [1, 'us'],
    ] as const) {
      await dbs.pool(i).query('ANALYZE once.inbox');
    }
    const g = await h.collect();
    expect(
      pointsOf(g, 'once.inbox.rows')
        .map((p) => p.attributes['db.namespace'])
        .sort(),
    ).toEqual(['eu', 'us']);
    expect(sumOf(g, 'once.inbox.rows', { 'db.namespace': 'eu' })).toBe(1);
    expect(sumOf(g, 'once.inbox.rows', { 'db.namespace': 'us' })).toBe(2);
    instrumentation.close();
  });
});
