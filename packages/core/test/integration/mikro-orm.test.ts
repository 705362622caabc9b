import { EntitySchema, type IsolationLevel, MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { withMikroOrm } from '../../src/mikro-orm/index.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';
import { ormSuite } from './fixtures/orm-suite.js';

interface Effect {
  seq?: string;
  id: string;
}

let db: Awaited<ReturnType<typeof freshDb>>;
let orm: MikroORM;
let EffectEntity: EntitySchema<Effect>;
beforeAll(async () => {
  db = await freshDb('core_mikro', 8);
  EffectEntity = new EntitySchema<Effect>({
    name: 'Effect',
    tableName: `${db.schema}.effects`,
    properties: { seq: { type: 'bigint', primary: true, autoincrement: true }, id: { type: 'string' } },
  });
  // MikroORM owns its connections: a pool of its own, as an application has.
  orm = await MikroORM.init({ clientUrl: DATABASE_URL, entities: [EffectEntity], pool: { min: 0, max: 40 } });
});
afterAll(async () => {
  await orm.close(true);
  await db.close();
});

describe('@once/core/mikro-orm (MikroORM opens the transaction)', () => {
  ormSuite({
    name: 'mikro-orm',
    db: () => db,
    effect: (opts = {}) =>
      withMikroOrm(orm.em, async (e, { tx }) => {
        tx.create(EffectEntity, { id: e.id! });
        await tx.flush();
        await opts.after?.(e.id!);
        return e.id;
      }),
    outside: () =>
      withMikroOrm(orm.em, async (e) => {
        const other = orm.em.fork();
        other.create(EffectEntity, { id: e.id! });
        await other.flush();
      }),
    late: (sleepMs, seen) =>
      withMikroOrm(orm.em, async (e, { tx }) => {
        tx.create(EffectEntity, { id: e.id! });
        await tx.flush();
        await new Promise((r) => setTimeout(r, sleepMs));
        tx.create(EffectEntity, { id: `${e.id}-late` });
        await tx.flush().then(
          () => seen(undefined),
          (err: unknown) => seen(err),
        );
      }),
  });

  it('isolationLevel opens the transaction at that level', async () => {
    let level: string | undefined;
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'iso',
      ...withMikroOrm(
        orm.em,
        async (_e, { tx }) => {
          const rows = await tx
            .getConnection()
            .execute('SHOW transaction_isolation', [], 'all', tx.getTransactionContext());
          level = rows[0]?.transaction_isolation as string | undefined;
        },
        { isolationLevel: 'serializable' as IsolationLevel },
      ),
    });
    expect(await inbox.process(envelope('iso-1'))).toMatchObject({ status: 'processed' });
    expect(level).toBe('serializable');
  });
});
