import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { readFence } from '../../src/adapter/index.js';
import { fingerprint } from '../../src/fingerprint.js';
import { createInbox, type Envelope, type Handler, PermanentError } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_fence', 8);
});
afterAll(async () => {
  await db.close();
});

/** Fence on the envelope's queue, partition 0 and offset. */
const fenceOf = (e: Envelope) => ({ stream: e.source.queue, partition: 0, offset: e.source.offset! });
const at = (stream: string, offset: number, patch: Partial<Envelope> = {}) =>
  envelope(`${stream}-${offset}`, {
    source: { broker: 'test', queue: stream, partition: 0, offset: String(offset) },
    ...patch,
  });
const write: Handler = async (e, { tx }) => {
  await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
};
const inbox = (consumer: string, handler: Handler = write, maxAttempts = 3) =>
  createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer,
    handler,
    fenceOf,
    maxAttempts,
    lockTimeoutMs: 10_000,
  });
const inboxRows = async (consumer: string) =>
  Number(
    (await db.pool.query(`SELECT count(*) AS n FROM ${db.schema}.inbox WHERE consumer = $1`, [consumer]))
      .rows[0].n,
  );
const fenceAt = async (consumer: string, stream: string) =>
  (
    await db.pool.query(
      `SELECT next_offset::text AS n FROM ${db.schema}.fences WHERE consumer = $1 AND stream = $2`,
      [consumer, stream],
    )
  ).rows[0]?.n as string | undefined;

describe('offset fencing', () => {
  it('processes in order without inbox rows; a redelivery at or below the fence is a duplicate', async () => {
    const ib = inbox('seq');
    for (let o = 0; o < 5; o++) expect((await ib.process(at('s1', o))).status).toBe('processed');
    expect(await fenceAt('seq', 's1')).toBe('5');
    const again = await ib.processBatch([0, 1, 2, 3, 4].map((o) => at('s1', o, { redelivered: true })));
    expect(again.map((o) => o.status)).toEqual(Array(5).fill('duplicate'));
    expect(await inboxRows('seq')).toBe(0);
    const counts = await db.counts();
    for (let o = 0; o < 5; o++) expect(counts.get(`s1-${o}`)).toBe(1);
    // An envelope that fenceOf does not place uses the inbox as usual.
    const mixed = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'seq',
      handler: write,
      fenceOf: (e) => (e.source.queue === 'plain' ? undefined : fenceOf(e)),
    });
    expect((await mixed.process(at('plain', 0))).status).toBe('processed');
    expect((await mixed.process(at('plain', 0))).status).toBe('duplicate');
    expect(await inboxRows('seq')).toBe(1);
  });

  it('a zombie on the same partition waits for the claim, then finds a duplicate', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let entered!: () => void;
    const inside = new Promise<void>((r) => {
      entered = r;
    });
    const slow = inbox('zombie', async (e, ctx) => {
      await write(e, ctx);
      entered();
      await gate;
    });
    const fast = inbox('zombie');
    const first = slow.process(at('s2', 0));
    await inside;
    const second = fast.process(at('s2', 0, { redelivered: true }));
    await new Promise((r) => setTimeout(r, 200));
    release();
    const [a, b] = await Promise.all([first, second]);
    expect(a.status).toBe('processed');
    expect(b.status).toBe('duplicate');
    expect((await db.counts()).get('s2-0')).toBe(1);
  });

  it('a batch with a transient failure at k leaves the fence at k; the redelivery runs k and later', async () => {
    let failOnce = true;
    const ib = inbox('batch', async (e, ctx) => {
      await write(e, ctx);
      if (e.id === 's3-4' && failOnce) {
        failOnce = false;
        throw new Error('transient');
      }
    });
    const first = await ib.processBatch([0, 1, 2, 3, 4, 5, 6].map((o) => at('s3', o)));
    expect(first.map((o) => o.status)).toEqual([
      ...Array(4).fill('processed'),
      'retry',
      'not-run',
      'not-run',
    ]);
    expect(await fenceAt('batch', 's3')).toBe('4');
    const second = await ib.processBatch(
      [4, 5, 6].map((o) => at('s3', o, { redelivered: true, attempt: 2 })),
    );
    expect(second.map((o) => o.status)).toEqual(Array(3).fill('processed'));
    expect(await fenceAt('batch', 's3')).toBe('7');
    const counts = await db.counts();
    for (let o = 0; o < 7; o++) expect(counts.get(`s3-${o}`)).toBe(1);
    expect(await inboxRows('batch')).toBe(0);
  });

  it('a permanent failure moves the fence and is failed again on redelivery', async () => {
    const ib = inbox('poison', async (e, ctx) => {
      await write(e, ctx);
      if (e.id === 's4-1') throw new PermanentError('bad');
    });
    const first = await ib.processBatch([0, 1, 2].map((o) => at('s4', o)));
    expect(first.map((o) => o.status)).toEqual(['processed', 'failed', 'processed']);
    expect(await fenceAt('poison', 's4')).toBe('3');
    const again = await ib.processBatch([0, 1, 2].map((o) => at('s4', o, { redelivered: true })));
    expect(again.map((o) => o.status)).toEqual(['duplicate', 'failed', 'duplicate']);
    expect(again[1]).toMatchObject({ reason: 'previously-failed' });
    const counts = await db.counts();
    expect(counts.get('s4-1')).toBeUndefined();
    expect(counts.get('s4-0')).toBe(1);
    expect(await inboxRows('poison')).toBe(1);
  });

  it('a fresh batch of one partition is one transaction: lock the fence, run, move it (13 round trips for 10)', async () => {
    let queries = 0;
    const counted = {
      query: (...a: Parameters<typeof db.pool.query>) => {
        queries++;
        return db.pool.query(...a);
      },
      connect: async () => {
        const client = await db.pool.connect();
        return new Proxy(client, {
          get(target, prop) {
            if (prop === 'query')
              return (...a: unknown[]) => {
                queries++;
                return (target.query as (...x: unknown[]) => unknown)(...a);
              };
            const v = Reflect.get(target, prop);
            return typeof v === 'function' ? v.bind(target) : v;
          },
        });
      },
    };
    const ib = createInbox({
      pool: counted as never,
      schema: db.schema,
      consumer: 'one-tx',
      handler: write,
      fenceOf,
    });
    await ib.ready();
    queries = 0;
    const out = await ib.processBatch(Array.from({ length: 10 }, (_, o) => at('s6', o)));
    expect(out.map((o) => o.status)).toEqual(Array(10).fill('processed'));
    // BEGIN with the fence lock, 10 effects, the fence move, COMMIT.
    expect(queries).toBe(13);
    expect(await fenceAt('one-tx', 's6')).toBe('10');
    expect(await inboxRows('one-tx')).toBe(0);
  });

  it('a fresh batch that straddles the fence: what lies below is a duplicate, the rest runs', async () => {
    const ib = inbox('straddle');
    await ib.processBatch([0, 1, 2, 3, 4].map((o) => at('s7', o)));
    const out = await ib.processBatch([3, 4, 5, 6, 7].map((o) => at('s7', o)));
    expect(out.map((o) => o.status)).toEqual([
      'duplicate',
      'duplicate',
      'processed',
      'processed',
      'processed',
    ]);
    expect(await fenceAt('straddle', 's7')).toBe('8');
    const counts = await db.counts();
    for (let o = 0; o < 8; o++) expect(counts.get(`s7-${o}`)).toBe(1);
  });

  it('a zombie and the new owner racing batches from the same offset: each offset once', async () => {
    // Both read from the partition's committed offset; the new owner got further.
    const zombie = inbox('race');
    const owner = inbox('race');
    const batch = (n: number) => Array.from({ length: n }, (_, o) => at('s8', o));
    const [x, y] = await Promise.all([zombie.processBatch(batch(20)), owner.processBatch(batch(30))]);
    const all = [...x, ...y];
    expect(all.filter((o) => o.status === 'processed')).toHaveLength(30);
    expect(all.every((o) => o.status === 'processed' || o.status === 'duplicate')).toBe(true);
    expect(await fenceAt('race', 's8')).toBe('30');
    const counts = await db.counts();
    for (let o = 0; o < 30; o++) expect(counts.get(`s8-${o}`)).toBe(1);
  });

  it('validates fenceOf and what it returns', async () => {
    expect(() =>
      createInbox({ pool: db.pool, consumer: 'x', handler: write, fenceOf: fenceOf, storeResult: true }),
    ).toThrow(/options\.fenceOf/);
    const ib = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'bad',
      handler: write,
      fenceOf: () => ({ stream: 's5', partition: 0, offset: '-1' }),
    });
    // The id is good, so a fenceOf that fails is the message's permanent failure, recorded.
    const o = await ib.process(at('s5', 0));
    expect(o).toMatchObject({ status: 'failed', reason: 'permanent', error: { message: /fenceOf threw/ } });
    const row = await db.pool.query(`SELECT status FROM ${db.schema}.inbox WHERE consumer = 'bad'`);
    expect(row.rows).toEqual([{ status: 'failed' }]);
  });

  it('records the id and fingerprint of the message the fence last moved past, on every path', async () => {
    const ib = inbox('last', async (e, ctx) => {
      if (e.id === 's6-4') throw new PermanentError('bad');
      await write(e, ctx);
    });
    const read = () => readFence(db.pool, `"${db.schema}"`, { consumer: 'last', stream: 's6', partition: 0 });
    expect(await read()).toBeUndefined();
    const one = at('s6', 0);
    await ib.process(one); // one message: the claim moves the fence
    expect(await read()).toEqual({ nextOffset: 1n, lastId: 's6-0', lastFingerprint: fingerprint(one.body) });
    const batch = [1, 2, 3].map((o) => at('s6', o));
    await ib.processBatch(batch); // a fenced batch: one move past its last message
    expect(await read()).toEqual({
      nextOffset: 4n,
      lastId: 's6-3',
      lastFingerprint: fingerprint(batch[2]!.body),
    });
    const poison = at('s6', 4);
    expect((await ib.process(poison)).status).toBe('failed'); // a recorded failure moves it too
    expect(await read()).toEqual({
      nextOffset: 5n,
      lastId: 's6-4',
      lastFingerprint: fingerprint(poison.body),
    });
    await ib.process(at('s6', 2, { redelivered: true })); // a duplicate leaves it
    expect((await read())?.lastId).toBe('s6-4');
  });
});
