import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import type { BatchMode } from '../../src/engine/options.js';
import { createInbox, type Handler, type Outcome, PermanentError } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_batch', 12);
});
afterAll(async () => {
  await db.close();
});

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

describe.each<BatchMode>(['optimistic', 'savepoint'])('batch mode %s', (batchMode) => {
  const inbox = (consumer: string, handler: Handler) =>
    createInbox({ pool: db.pool, schema: db.schema, consumer, handler, batchMode, maxAttempts: 3 });
  const write = async (
    id: string | undefined,
    tx: { query: (t: string, v?: unknown[]) => Promise<unknown> },
  ) => {
    await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [id]);
  };

  it('a transient failure at message k of 10 stops the batch there and leaks no claim', async () => {
    const p = `${batchMode}-k`;
    let failOnce = true;
    const ib = inbox(`${p}`, async (e, { tx }) => {
      await write(e.id, tx);
      if (e.id === `${p}-4` && failOnce) {
        failOnce = false;
        throw new Error('transient');
      }
    });
    const first = await ib.processBatch(ids(p, 10).map((id) => envelope(id)));
    expect(first.map((o) => o.status)).toEqual([
      ...Array(4).fill('processed'),
      'retry',
      ...Array(5).fill('not-run'),
    ]);
    expect(first[4]).toMatchObject({ spent: true });
    expect(first[5]).toMatchObject({ why: 'behind' });
    // The ordered broker redelivers from the failed message on.
    const second = await ib.processBatch(
      ids(p, 10)
        .slice(4)
        .map((id) => envelope(id, { redelivered: true, attempt: 2 })),
    );
    expect(second.every((o) => o.status === 'processed')).toBe(true);
    const counts = await db.counts();
    for (const id of ids(p, 10)) expect(counts.get(id)).toBe(1);
  });

  it('a redelivery of the whole batch (e.g. after a crash) is all duplicates for what committed', async () => {
    const p = `${batchMode}-r`;
    const ib = inbox(p, async (e, { tx }) => write(e.id, tx));
    await ib.processBatch(ids(p, 5).map((id) => envelope(id)));
    const again = await ib.processBatch(ids(p, 5).map((id) => envelope(id)));
    expect(again.every((o) => o.status === 'duplicate')).toBe(true);
  });

  it('permanent failures inside a batch are recorded failed; neighbours commit', async () => {
    const p = `${batchMode}-p`;
    const ib = inbox(p, async (e, { tx }) => {
      await write(e.id, tx);
      if (e.id === `${p}-2` || e.id === `${p}-6`) throw new PermanentError('bad amount');
    });
    const out = await ib.processBatch(ids(p, 8).map((id) => envelope(id)));
    expect(out.map((o) => o.status)).toEqual([
      'processed',
      'processed',
      'failed',
      'processed',
      'processed',
      'processed',
      'failed',
      'processed',
    ]);
    const counts = await db.counts();
    expect(counts.get(`${p}-2`)).toBeUndefined();
    expect(counts.get(`${p}-6`)).toBeUndefined();
    expect(counts.get(`${p}-7`)).toBe(1);
    const redelivered = await ib.process(envelope(`${p}-2`, { redelivered: true, attempt: 2 }));
    expect(redelivered).toMatchObject({ status: 'failed', reason: 'previously-failed' });
  });

  it('mixed duplicates inside one batch, and a missing id, each get their own outcome', async () => {
    const p = `${batchMode}-m`;
    const ib = inbox(p, async (e, { tx }) => write(e.id, tx));
    await ib.process(envelope(`${p}-old`));
    const out = await ib.processBatch([
      envelope(`${p}-a`),
      envelope(`${p}-old`),
      envelope(`${p}-a`),
      envelope(undefined),
      envelope(`${p}-b`),
      envelope(`${p}-a`, { body: Buffer.from('different') }),
    ]);
    expect(out.map((o) => o.status)).toEqual([
      'processed',
      'duplicate',
      'duplicate',
      'failed',
      'processed',
      'conflict',
    ]);
    const counts = await db.counts();
    expect(counts.get(`${p}-a`)).toBe(1);
    expect(counts.get(`${p}-old`)).toBe(1);
  });

  it('overlapping concurrent batches neither deadlock nor repeat', async () => {
    const p = `${batchMode}-o`;
    const ib = inbox(p, async (e, { tx }) => write(e.id, tx));
    const all = ids(p, 60);
    const shuffled = () => [...all].sort(() => Math.random() - 0.5).slice(0, 40);
    const runs = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const out = [];
        let batch = shuffled().map((id) => envelope(id));
        // Retry what came back retry/busy, as a broker would.
        for (let round = 0; round < 20 && batch.length > 0; round++) {
          const res = await ib.processBatch(batch);
          const again = (o: Outcome) => o.status === 'retry' || o.status === 'busy' || o.status === 'not-run';
          out.push(...res.filter((o) => !again(o)));
          batch = res.filter(again).map((o) => o.envelope);
        }
        expect(batch).toHaveLength(0);
        return out;
      }),
    );
    const processed = runs.flat().filter((o) => o.status === 'processed').length;
    const counts = await db.counts();
    const mine = [...counts].filter(([id]) => id.startsWith(`${p}-`));
    expect(mine.every(([, n]) => n === 1)).toBe(true);
    expect(processed).toBe(mine.length);
  });

  it('a redelivered message runs in its own transaction, so a poison cannot blame its neighbours', async () => {
    const p = `${batchMode}-iso`;
    const seenTx = new Map<string, number>();
    const ib = inbox(p, async (e, { tx }) => {
      const txid = (await tx.query('SELECT txid_current() AS t')).rows[0].t;
      seenTx.set(e.id!, Number(txid));
      await write(e.id, tx);
    });
    const batch = ids(p, 4).map((id, i) => envelope(id, { redelivered: i >= 2, attempt: i >= 2 ? 2 : 1 }));
    await ib.processBatch(batch);
    expect(seenTx.get(`${p}-0`)).toBe(seenTx.get(`${p}-1`));
    expect(seenTx.get(`${p}-2`)).not.toBe(seenTx.get(`${p}-3`));
    expect(seenTx.get(`${p}-1`)).not.toBe(seenTx.get(`${p}-2`));
  });
});

it('a batch whose claim meets a held id past the wait bound falls back to claiming one by one', async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  let started!: () => void;
  const holding = new Promise<void>((r) => {
    started = r;
  });
  const write = async (
    id: string | undefined,
    tx: { query: (t: string, v?: unknown[]) => Promise<unknown> },
  ) => {
    await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [id]);
  };
  const holder = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'wait-bound',
    handler: async (e, { tx }) => {
      await write(e.id, tx);
      started();
      await gate;
    },
  });
  const held = holder.process(envelope('wb-2'));
  await holding;
  const ib = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'wait-bound',
    lockTimeoutMs: 200,
    handler: async (e, { tx }) => write(e.id, tx),
  });
  const out = await ib.processBatch(['wb-0', 'wb-1', 'wb-2', 'wb-3'].map((id) => envelope(id)));
  expect(out.map((o) => o.status)).toEqual(['processed', 'processed', 'busy', 'not-run']);
  release();
  expect(await held).toMatchObject({ status: 'processed' });
  const counts = await db.counts();
  expect(['wb-0', 'wb-1', 'wb-2'].map((id) => counts.get(id))).toEqual([1, 1, 1]);
  expect(counts.get('wb-3')).toBeUndefined();
});
