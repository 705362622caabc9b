import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import {
  createInbox,
  createOutbox,
  createRelay,
  type OutboxMessage,
  type OutboxPublisher,
  PermanentError,
} from '../../src/index.js';
import { fromJsonb } from '../../src/sql/jsonb.js';
import { envelope } from './fixtures/db.js';

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
    expect(o).toMatchObject({
      status: 'retry',
      error: { message: expect.stringMatching(/options.outbox/) },
    });
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
      sentRetentionMs: 1,
      cleanupIntervalMs: 1,
    });
    await relay.runOnce();
    expect(await count('sent')).toBe(30);
    await new Promise((r) => setTimeout(r, 20));
    await relay.runOnce();
    expect(await count('sent')).toBe(0);
  });

  it('sentRetentionMs 0: a confirmed row is deleted in its round, never before; a refused one stays pending', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['c'] });
    for (let i = 0; i < 30; i++) await outbox.enqueue(db.pool, 'c', `${i}`);
    const rowsNow = async () =>
      Number((await db.pool.query(`SELECT count(*)::int AS n FROM ${db.schema}.outbox`)).rows[0].n);
    const rec = recorder({ fail: (m) => m.body.toString() === '3' || m.body.toString() === '7' });
    const seenWhilePublishing: number[] = [];
    const publisher: OutboxPublisher = {
      async publish(messages, options) {
        // Read from another connection while the round holds its rows: all still there.
        seenWhilePublishing.push(await rowsNow());
        return rec.publisher.publish(messages, options);
      },
    };
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { c: publisher },
      sentRetentionMs: 0,
    });
    expect(await relay.runOnce()).toBe(30);
    expect(seenWhilePublishing).toEqual([30]);
    expect(rec.sent).toHaveLength(28);
    const left = (
      await db.pool.query<{ body: Buffer; status: string; attempts: number }>(
        `SELECT body, status, attempts FROM ${db.schema}.outbox ORDER BY seq`,
      )
    ).rows;
    expect(left.map((r) => [r.body.toString(), r.status, r.attempts])).toEqual([
      ['3', 'pending', 1],
      ['7', 'pending', 1],
    ]);
    expect(await count('sent')).toBe(0);
  });
});

describe('relay deadline (publishTimeoutMs)', () => {
  const rowsOf = async () =>
    (
      await db.pool.query<{ body: Buffer; status: string; attempts: number; last_error: unknown }>(
        `SELECT body, status, attempts, last_error FROM ${db.schema}.outbox ORDER BY seq`,
      )
    ).rows;

  /**
   * A publisher that answers only after the deadline: it sees the abort, then confirms every
   * message anyway (as a broker whose ack was stuck in a buffer would). `hang` calls do that;
   * later calls confirm at once.
   */
  function late(hang: number) {
    const calls: { bodies: string[]; aborted: boolean }[] = [];
    const confirmedLate: Promise<void>[] = [];
    const publisher: OutboxPublisher = {
      publish(messages, options) {
        const call = { bodies: messages.map((m) => m.body.toString()), aborted: false };
        calls.push(call);
        if (calls.length > hang)
          return Promise.resolve(messages.map((m) => ({ id: m.id, ok: true as const })));
        return new Promise((resolve) => {
          const confirm = () => {
            call.aborted = options?.signal?.aborted ?? false;
            setTimeout(() => resolve(messages.map((m) => ({ id: m.id, ok: true as const }))), 50);
          };
          if (options?.signal?.aborted) confirm();
          else options?.signal?.addEventListener('abort', confirm, { once: true });
          confirmedLate.push(new Promise((r) => setTimeout(r, 200)));
        });
      },
    };
    return { publisher, calls, confirmedLate };
  }

  it('a call outliving the deadline is aborted, its rows stay pending with attempts unchanged, and a late confirmation marks nothing sent', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['slow', 'fast'] });
    for (let i = 0; i < 3; i++) await outbox.enqueue(db.pool, 'slow', `s${i}`, { key: 'k' });
    await outbox.enqueue(db.pool, 'fast', 'f0');
    const slow = late(2);
    const fast = recorder();
    const failed: { attempts: number; code: string | undefined }[] = [];
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { slow: slow.publisher, fast: fast.publisher },
      publishTimeoutMs: 100,
      maxAttempts: 1, // a counted failure would park at once: a timeout must not count
      listen: false,
    });
    relay.on('outbox:publish-failed', (e) => failed.push({ attempts: e.attempts, code: e.error.code }));

    // Two rounds whose slow call confirms only after the deadline.
    for (let round = 0; round < 2; round++) {
      // The first round also claims the other destination's row.
      expect(await relay.runOnce()).toBe(round === 0 ? 2 : 1);
      await Promise.all(slow.confirmedLate);
      const rows = await rowsOf();
      expect(rows.filter((r) => r.body.toString().startsWith('s'))).toEqual(
        ['s0', 's1', 's2'].map((b) => ({
          body: Buffer.from(b),
          status: 'pending',
          attempts: 0,
          last_error: null,
        })),
      );
    }
    expect(slow.calls.map((c) => c.aborted)).toEqual([true, true]);
    // Only the head of key k was ever in flight: the same row, twice.
    expect(slow.calls.map((c) => c.bodies)).toEqual([['s0'], ['s0']]);
    expect(failed).toEqual([
      { attempts: 0, code: 'PUBLISH_TIMEOUT' },
      { attempts: 0, code: 'PUBLISH_TIMEOUT' },
    ]);
    expect(relay.health().lastError).toMatch(/publishTimeoutMs \(100 ms\)/);
    // The other destination's row was recorded as usual in the first round.
    expect(fast.sent.map((m) => m.body.toString())).toEqual(['f0']);
    expect(await count('sent')).toBe(1);
    expect(await count('failed')).toBe(0);

    // The broker answers again: the key drains in order, each row once more.
    for (let i = 0; i < 3; i++) await relay.runOnce();
    expect(slow.calls.map((c) => c.bodies)).toEqual([['s0'], ['s0'], ['s0'], ['s1'], ['s2']]);
    expect((await rowsOf()).map((r) => [r.body.toString(), r.status, r.attempts])).toEqual([
      ['s0', 'sent', 1],
      ['s1', 'sent', 1],
      ['s2', 'sent', 1],
      ['f0', 'sent', 1],
    ]);
  });

  it('stop() returns while a publisher never answers, long before the deadline, and leaves its row pending', {
    timeout: 20_000,
  }, async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['void'] });
    await outbox.enqueue(db.pool, 'void', 'lost', { key: 'k' });
    const calls: AbortSignal[] = [];
    // Ignores the signal too: the relay must not depend on the publisher's good manners.
    const never: OutboxPublisher = {
      publish(_messages, options) {
        if (options?.signal) calls.push(options.signal);
        return new Promise(() => {});
      },
    };
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { void: never },
      publishTimeoutMs: 600_000,
      pollIntervalMs: 20,
    });
    const abandoned: (string | undefined)[] = [];
    relay.on('outbox:publish-failed', (e) => abandoned.push(e.error.code));
    await relay.start();
    while (calls.length < 1) await new Promise((r) => setTimeout(r, 20));
    await relay.stop();
    expect(calls).toHaveLength(1);
    expect(calls[0]!.aborted).toBe(true);
    expect(abandoned).toEqual(['CLOSED']);
    expect((await rowsOf()).map((r) => [r.status, r.attempts])).toEqual([['pending', 0]]);
    // The round's row lock is gone with it: another relay can take the row.
    const rec = recorder();
    await createRelay({ pool: db.pool, schema: db.schema, publishers: { void: rec.publisher } }).runOnce();
    expect(rec.sent.map((m) => m.body.toString())).toEqual(['lost']);
  });

  it('rejects a publishTimeoutMs that is not a positive integer, naming it', () => {
    expect(() =>
      createRelay({ pool: db.pool, publishers: { a: recorder().publisher }, publishTimeoutMs: 0 }),
    ).toThrow(/publishTimeoutMs/);
  });
});

describe('outbox headers through jsonb', () => {
  it('a header value holding a NUL (and a lone surrogate) reaches the publisher unchanged', async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['h'] });
    const headers = { 'x-bin': 'a\u0000b', 'x-\u0000key': 'v', 'x-half': '\ud800', $once: 'mine' };
    await outbox.enqueue(db.pool, 'h', 'body', { headers });
    const rec = recorder();
    await createRelay({ pool: db.pool, schema: db.schema, publishers: { h: rec.publisher } }).runOnce();
    expect(rec.sent).toHaveLength(1);
    expect(rec.sent[0]!.headers).toEqual(headers);
    expect(Buffer.from(rec.sent[0]!.headers['x-bin']!)).toEqual(Buffer.from('a\u0000b'));
  });

  it("a publisher's error holding a NUL is stored in last_error as it was", async () => {
    await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['e'] });
    await outbox.enqueue(db.pool, 'e', 'x');
    const rec = recorder({ fail: () => true });
    const nul: OutboxPublisher = {
      async publish(messages) {
        await rec.publisher.publish(messages);
        return messages.map((m) => ({
          id: m.id,
          ok: false as const,
          error: new Error('bad byte \u0000 here'),
        }));
      },
    };
    await createRelay({ pool: db.pool, schema: db.schema, publishers: { e: nul } }).runOnce();
    const row = (await db.pool.query(`SELECT attempts, last_error FROM ${db.schema}.outbox`)).rows[0];
    expect(row.attempts).toBe(1);
    expect(fromJsonb<{ message: string }>(row.last_error).message).toBe('bad byte \u0000 here');
  });
});
