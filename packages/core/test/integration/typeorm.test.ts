import { DataSource, type EntityManager, EntitySchema } from 'typeorm';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { withTypeorm } from '../../src/typeorm/index.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';
import { ormSuite } from './fixtures/orm-suite.js';

interface Effect {
  seq?: string;
  id: string;
}

let db: Awaited<ReturnType<typeof freshDb>>;
let dataSource: DataSource;
let EffectEntity: EntitySchema<Effect>;
beforeAll(async () => {
  db = await freshDb('core_typeorm', 8);
  EffectEntity = new EntitySchema<Effect>({
    name: 'Effect',
    tableName: 'effects',
    schema: db.schema,
    columns: { seq: { type: 'bigint', primary: true, generated: 'increment' }, id: { type: 'text' } },
  });
  // TypeORM owns its connections: a pool of its own, as an application has.
  dataSource = new DataSource({
    type: 'postgres',
    url: DATABASE_URL,
    entities: [EffectEntity],
    poolSize: 40,
  });
  await dataSource.initialize();
});
afterAll(async () => {
  await dataSource.destroy();
  await db.close();
});

describe('@once/core/typeorm (TypeORM opens the transaction)', () => {
  ormSuite({
    name: 'typeorm',
    db: () => db,
    effect: (opts = {}) =>
      withTypeorm(dataSource, async (e, { tx }) => {
        await tx.insert(EffectEntity, { id: e.id! });
        await opts.after?.(e.id!);
        return e.id;
      }),
    outside: () =>
      withTypeorm(dataSource, async (e) => {
        await dataSource.manager.insert(EffectEntity, { id: e.id! });
      }),
    late: (sleepMs, seen) =>
      withTypeorm(dataSource, async (e, { tx }) => {
        await tx.insert(EffectEntity, { id: e.id! });
        await new Promise((r) => setTimeout(r, sleepMs));
        await tx.insert(EffectEntity, { id: `${e.id}-late` }).then(
          () => seen(undefined),
          (err: unknown) => seen(err),
        );
      }),
  });

  it('types: the handler receives the transaction EntityManager', () => {
    withTypeorm(dataSource, async (_e, { tx }) => {
      expectTypeOf(tx).toEqualTypeOf<EntityManager>();
    });
  });

  it('isolationLevel opens the transaction at that level', async () => {
    let level: string | undefined;
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'iso',
      ...withTypeorm(
        dataSource,
        async (_e, { tx }) => {
          level = (await tx.query('SHOW transaction_isolation'))[0].transaction_isolation;
        },
        { isolationLevel: 'SERIALIZABLE' },
      ),
    });
    expect(await inbox.process(envelope('iso-1'))).toMatchObject({ status: 'processed' });
    expect(level).toBe('serializable');
  });
});
