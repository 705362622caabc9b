import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createInbox,
  createOutbox,
  createRelay,
  type OutboxMessage,
  type OutboxPublisher,
  PermanentError,
} from '../../src/index.js';
import { envelope, freshDb } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_outbox', 16);
});
afterAll(async () => {
  await db.close();
});

/** A publisher of our own interface that records what it was given (the broker side is tested per adapter). */
function recorder(opts: { delayMs?: number; fail?: (m: OutboxMessage) => boolean } = {}) {
  const sent: OutboxMessage[] = [];
  let inFlight = new Map<string, number>();
  let overlap = 0;
  const publisher: OutboxPublisher = {
    async publish(messages) {
      for (const m of messages) {
        const k = `${m.destination}/${m.key}`;
        if (m.key && (inFlight.get(k) ?? 0) > 0) overlap++;
        inFlight.set(k, (inFlight.get(k) ?? 0) + 1);
      }
      if (opts.delayMs) await new Promise((r) => setTimeout(r, opts.delayMs));
      for (const m of messages)
        inFlight.set(`${m.destination}/${m.key}`, (inFlight.get(`${m.destination}/${m.key}`) ?? 1) - 1);
      return messages.map((m) => {
        if (opts.fail?.(m)) return { id: m.id, ok: false as const, error: new Error('broker said no') };
        sent.push(m);
        return { id: m.id, ok: true as const };
      });
    },
  };
  return {
    publisher,
    sent,
    get overlap() {
      return overlap;
    },
    reset() {
      sent.length = 0;
      inFlight = new Map();
    },
  };
}

const count = async (status: string) =>
  Number(
    (await db.pool.query(`SELECT count(*) AS n FROM ${db.schema}.outbox WHERE status = $1`, [status])).rows[0]
      .n,
  );

describe('enqueue', () => {
  it('ctx.publish writes in the handler transaction; a rolled-back handler publishes nothing', async () => {
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['orders'] });
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'pub',
      outbox,
      handler: async (e, ctx) => {
        await ctx.publish('orders', { order: e.id }, { key: 'acct-1', headers: { 'x-tenant': 't1' } });
        if (e.id === 'boom') throw new PermanentError('no');
      },
    });
    expect(await inbox.process(envelope('ok1'))).toMatchObject({ status: 'processed' });
    expect(await inbox.process(envelope('boom'))).toMatchObject({ status: 'failed' });
    const rows = (
      await db.pool.query(`SELECT destination, key, body, headers, status FROM ${db.schema}.outbox`)
    ).rows;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      destination: 'orders',
      key: 'acct-1',
      headers: { 'x-tenant': 't1' },
      status: 'pending',
    });
    expect(JSON.parse(rows[0].body.toString())).toEqual({ order: 'ok1' });
  });

  it('refuses bad input at enqueue with a named error', async () => {
    const outbox = createOutbox({
      pool: db.pool,
      schema: db.schema,
      destinations: { 'sqs-queue': { maxBodyBytes: 262_144 } },
    });
    const client = db.pool;
    await expect(outbox.enqueue(client, 'nope', 'x')).rejects.toMatchObject({
      code: 'OUTBOX_INVALID',
      message: expect.stringMatching(/unknown destination "nope"/),
    });
    await expect(outbox.enqueue(client, 'sqs-queue', Buffer.alloc(262_145))).rejects.toMatchObject({
      message: expect.stringMatching(/262145 bytes exceeds 262144/),
    });
    await expect(
      outbox.enqueue(client, 'sqs-queue', 'x', { headers: { n: 5 as unknown as string } }),
    ).rejects.toMatchObject({ message: expect.stringMatching(/header "n" must be a string/) });
    expect(() => createOutbox({ pool: db.pool, destinations: [] })).toThrow(/at least one destination/);
  });

  it('ctx.publish without an outbox says how to configure one', async () => {
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'nopub',
      handler: async (_e, ctx) => {
        await ctx.publish('orders', 'x');
      },
    });
    const o = await inbox.process(envelope('np1'));
    expect(o).toMatchObject({ status: 'retry', error: { message: expect.stringMatching(/options.outbox/) } });
  });
});

describe('relay', () => {
  it('publishes with the row id as message id and marks rows sent only on confirmation', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['a', 'b'] });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await outbox.enqueue(db.pool, i % 2 ? 'a' : 'b', `m${i}`));
    const rec = recorder({ fail: (m) => m.body.toString() === 'm3' });
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { a: rec.publisher, b: rec.publisher },
    });
    expect(await relay.runOnce()).toBe(5);
    expect(rec.sent.map((m) => m.id).sort()).toEqual(ids.filter((_, i) => i !== 3).sort());
    expect(ids.every((id) => /^[0-9a-f-]{36}$/.test(id))).toBe(true);
    expect(await count('sent')).toBe(4);
    expect(await count('pending')).toBe(1);
    const row = (
      await db.pool.query(
        `SELECT attempts, last_error, available_at > now() AS later FROM ${db.schema}.outbox WHERE status = 'pending'`,
      )
    ).rows[0];
    expect(row).toMatchObject({ attempts: 1, later: true, last_error: { message: 'broker said no' } });
    // Something was confirmed in that round, so health shows no error.
    expect(relay.health().lastError).toBeUndefined();
  });

  it('parks a row after maxAttempts, visible as failed, never deleted', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['a'] });
    const id = await outbox.enqueue(db.pool, 'a', 'poison');
    const rec = recorder({ fail: () => true });
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { a: rec.publisher },
      maxAttempts: 3,
      retryDelayMs: () => 0,
    });
    const parked: string[] = [];
    relay.on('outbox:parked', (e) => parked.push(e.id));
    for (let i = 0; i < 5; i++) await relay.runOnce();
    expect(parked).toEqual([id]);
    // A round where the broker refused everything shows in health.
    expect(relay.health().lastError).toMatch(/publish failed: broker said no/);
    expect(await count('failed')).toBe(1);
    expect(relay.health().parked).toBe(1);
  });

  it('keeps per-key order with three relays and never has two rows of a key in flight', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['k'] });
    const keys = ['k1', 'k2', 'k3', 'k4'];
    for (let i = 0; i < 80; i++) await outbox.enqueue(db.pool, 'k', `${i}`, { key: keys[i % keys.length] });
    const rec = recorder({ delayMs: 5 });
    const relays = [0, 1, 2].map(() =>
      createRelay({
        pool: db.pool,
        schema: db.schema,
        publishers: { k: rec.publisher },
        batchSize: 10,
        listen: false,
      }),
    );
    for (let round = 0; round < 200 && (await count('pending')) > 0; round++) {
      await Promise.all(relays.map((r) => r.runOnce()));
    }
    expect(await count('sent')).toBe(80);
    expect(rec.overlap).toBe(0);
    for (const key of keys) {
      const seen = rec.sent.filter((m) => m.key === key).map((m) => Number(m.body.toString()));
      expect(seen).toEqual([...seen].sort((a, b) => a - b));
      expect(seen).toHaveLength(20);
    }
  });

  it('a relay that dies mid-publish leaves rows pending; they go out again with the same id', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['a'] });
    const id = await outbox.enqueue(db.pool, 'a', 'once');
    const seen: string[] = [];
    const dying: OutboxPublisher = {
      async publish(messages) {
        for (const m of messages) seen.push(m.id);
        throw Object.assign(new Error('Connection terminated unexpectedly'), { code: '08006' });
      },
    };
    await createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { a: dying },
      retryDelayMs: () => 0,
    }).runOnce();
    const rec = recorder();
    await createRelay({ pool: db.pool, schema: db.schema, publishers: { a: rec.publisher } }).runOnce();
    expect(seen).toEqual([id]);
    expect(rec.sent.map((m) => m.id)).toEqual([id]);
  });

  it('LISTEN/NOTIFY wakes a started relay soon after the handler commits', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['w'] });
    const rec = recorder();
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { w: rec.publisher },
      pollIntervalMs: 60_000,
    });
    await relay.start();
    try {
      await new Promise((r) => setTimeout(r, 200));
      expect(relay.health().listening).toBe(true);
      const inbox = createInbox({
        pool: db.pool,
        schema: db.schema,
        consumer: 'wake',
        outbox,
        handler: async (_e, ctx) => {
          await ctx.publish('w', 'hello');
        },
      });
      const t0 = Date.now();
      await inbox.process(envelope('wk1'));
      while (rec.sent.length === 0 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 20));
      expect(rec.sent).toHaveLength(1);
      expect(Date.now() - t0).toBeLessThan(10_000);
    } finally {
      await relay.stop();
    }
  });

  it('cleans up sent rows past their retention, in batches', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['c'] });
    for (let i = 0; i < 30; i++) await outbox.enqueue(db.pool, 'c', `${i}`);
    const rec = recorder();
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { c: rec.publisher },
      sentRetentionMs: 0,
      cleanupIntervalMs: 1,
    });
    await relay.runOnce();
    expect(await count('sent')).toBe(30);
    await new Promise((r) => setTimeout(r, 20));
    await relay.runOnce();
    expect(await count('sent')).toBe(0);
  });
});
