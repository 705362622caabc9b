import type { Generated, Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { withKysely } from '../../src/kysely/index.js';
import { envelope } from './fixtures/db.js';
import { ormSuite } from './fixtures/orm-suite.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_kysely', 48);
});
afterAll(async () => {
  await db.close();
});

interface Database {
  effects: { seq: Generated<string>; id: string };
}
const table = () => `${db.schema}.effects` as 'effects';

describe('@once/core/kysely (once opens the transaction)', () => {
  ormSuite({
    name: 'kysely',
    db: () => db,
    effect: (opts = {}) =>
      withKysely<Database>(async (e, { tx }) => {
        await tx.insertInto(table()).values({ id: e.id! }).execute();
        await opts.after?.(e.id!);
        return e.id;
      }),
    outside: () => ({
      // A write through the pool: commits on its own, whatever the handler's transaction does.
      ...withKysely<Database>(async (e) => {
        await db.pool.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      }),
    }),
    late: (sleepMs, seen) =>
      withKysely<Database>(async (e, { tx }) => {
        await tx.insertInto(table()).values({ id: e.id! }).execute();
        await new Promise((r) => setTimeout(r, sleepMs));
        await tx
          .insertInto(table())
          .values({ id: `${e.id}-late` })
          .execute()
          .then(
            () => seen(undefined),
            (err: unknown) => seen(err),
          );
      }),
  });

  it('types: the handler receives Transaction<DB>', () => {
    withKysely<Database>(async (_e, { tx }) => {
      expectTypeOf(tx).toEqualTypeOf<Transaction<Database>>();
    });
  });

  it('reads see the message transaction; numAffectedRows; nested transaction() refused', async () => {
    let seen: unknown[] = [];
    let affected: bigint | undefined;
    let nested: unknown;
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'reads',
      ...withKysely<Database>(async (e, { tx }) => {
        await tx.insertInto(table()).values({ id: e.id! }).execute();
        seen = await tx.selectFrom(table()).select('id').where('id', '=', e.id!).execute();
        const upd = await tx
          .updateTable(table())
          .set({ id: e.id! })
          .where('id', '=', e.id!)
          .executeTakeFirst();
        affected = upd.numUpdatedRows;
        try {
          await tx.transaction().execute(async () => {});
        } catch (err) {
          nested = err;
        }
      }),
    });
    expect(await inbox.process(envelope('k1'))).toMatchObject({ status: 'processed' });
    expect(seen).toEqual([{ id: 'k1' }]);
    expect(affected).toBe(1n);
    expect(nested).toBeInstanceOf(Error);
    const counts = await db.counts();
    expect(counts.get('k1')).toBe(1);
  });

  it('works in lease mode, where ctx.tx opens its transaction on first use', async () => {
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'lease',
      mode: 'lease',
      ...withKysely<Database>(async (e, { tx }) => {
        await tx.insertInto(table()).values({ id: e.id! }).execute();
      }),
    });
    expect(await inbox.process(envelope('lease-1'))).toMatchObject({ status: 'processed' });
    expect(await inbox.process(envelope('lease-1', { redelivered: true, attempt: 2 }))).toMatchObject({
      status: 'duplicate',
    });
    expect((await db.counts()).get('lease-1')).toBe(1);
  });
});
