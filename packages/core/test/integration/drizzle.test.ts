import { eq } from 'drizzle-orm';
import { alias, bigserial, pgSchema, text } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { type DrizzleTx, withDrizzle } from '../../src/drizzle/index.js';
import { createInbox } from '../../src/index.js';
import { envelope } from './fixtures/db.js';
import { ormSuite } from './fixtures/orm-suite.js';

let db: Awaited<ReturnType<typeof freshDb>>;
let effects: ReturnType<typeof tableIn>;
const tableIn = (schema: string) =>
  pgSchema(schema).table('effects', {
    seq: bigserial('seq', { mode: 'bigint' }).primaryKey(),
    id: text('id').notNull(),
  });
beforeAll(async () => {
  db = await freshDb('core_drizzle', 48);
  effects = tableIn(db.schema);
});
afterAll(async () => {
  await db.close();
});

describe('@once/core/drizzle (once opens the transaction)', () => {
  ormSuite({
    name: 'drizzle',
    db: () => db,
    effect: (opts = {}) =>
      withDrizzle({}, async (e, { tx }) => {
        await tx.insert(effects).values({ id: e.id! });
        await opts.after?.(e.id!);
        return e.id;
      }),
    outside: () =>
      withDrizzle({}, async (e) => {
        await db.pool.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      }),
    late: (sleepMs, seen) =>
      withDrizzle({}, async (e, { tx }) => {
        await tx.insert(effects).values({ id: e.id! });
        await new Promise((r) => setTimeout(r, sleepMs));
        await tx
          .insert(effects)
          .values({ id: `${e.id}-late` })
          .then(
            () => seen(undefined),
            (err: unknown) => seen(err),
          );
      }),
  });

  it('types: the handler receives the Drizzle transaction', () => {
    const schema = { effects: tableIn('x') };
    withDrizzle(schema, async (_e, { tx }) => {
      expectTypeOf(tx).toEqualTypeOf<DrizzleTx<typeof schema>>();
    });
  });

  it("selects map through Drizzle's own driver (bigint mode, array rows, joins with one column name twice); nested transactions are savepoints", async () => {
    let rows: { seq: bigint; id: string }[] = [];
    let joined: { a: string; b: string }[] = [];
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'reads',
      ...withDrizzle({}, async (e, { tx }) => {
        await tx.insert(effects).values({ id: e.id! });
        rows = await tx.select().from(effects).where(eq(effects.id, e.id!));
        const other = alias(effects, 'other');
        joined = await tx
          .select({ a: effects.id, b: other.id })
          .from(effects)
          .innerJoin(other, eq(effects.seq, other.seq))
          .where(eq(effects.id, e.id!));
        await tx
          .transaction(async (sp) => {
            await sp.insert(effects).values({ id: `${e.id}-undone` });
            sp.rollback();
          })
          .catch(() => {});
      }),
    });
    expect(await inbox.process(envelope('z1'))).toMatchObject({ status: 'processed' });
    expect(rows).toHaveLength(1);
    expect(typeof rows[0]!.seq).toBe('bigint');
    expect(joined).toEqual([{ a: 'z1', b: 'z1' }]);
    const counts = await db.counts();
    expect([counts.get('z1'), counts.get('z1-undone')]).toEqual([1, undefined]);
  });

  it('works in lease mode, where ctx.tx opens its transaction on first use', async () => {
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'lease',
      mode: 'lease',
      ...withDrizzle({}, async (e, { tx }) => {
        await tx.insert(effects).values({ id: e.id! });
      }),
    });
    expect(await inbox.process(envelope('lease-1'))).toMatchObject({ status: 'processed' });
    expect(await inbox.process(envelope('lease-1', { redelivered: true, attempt: 2 }))).toMatchObject({
      status: 'duplicate',
    });
    expect((await db.counts()).get('lease-1')).toBe(1);
  });
});
