import knexFactory, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { knexRaw, withKnex } from '../../src/knex/index.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';
import { ormSuite } from './fixtures/orm-suite.js';

let db: Awaited<ReturnType<typeof freshDb>>;
let knex: Knex;
beforeAll(async () => {
  db = await freshDb('core_knex', 8);
  // Knex owns its connections: a pool of its own, as an application has.
  knex = knexFactory({ client: 'pg', connection: DATABASE_URL, pool: { min: 0, max: 40 } });
});
afterAll(async () => {
  await knex.destroy();
  await db.close();
});

const effects = (tx: Knex.Transaction | Knex) => tx.withSchema(db.schema).table('effects');

describe('@once/core/knex (Knex opens the transaction)', () => {
  ormSuite({
    name: 'knex',
    db: () => db,
    effect: (opts = {}) =>
      withKnex(knex, async (e, { tx }) => {
        await effects(tx).insert({ id: e.id! });
        await opts.after?.(e.id!);
        return e.id;
      }),
    outside: () =>
      withKnex(knex, async (e) => {
        await effects(knex).insert({ id: e.id! });
      }),
    late: (sleepMs, seen) =>
      withKnex(knex, async (e, { tx }) => {
        await effects(tx).insert({ id: e.id! });
        await new Promise((r) => setTimeout(r, sleepMs));
        await effects(tx)
          .insert({ id: `${e.id}-late` })
          .then(
            () => seen(undefined),
            (err: unknown) => seen(err),
          );
      }),
  });

  it('types: the handler receives the Knex transaction', () => {
    withKnex(knex, async (_e, { tx }) => {
      expectTypeOf(tx).toEqualTypeOf<Knex.Transaction>();
    });
  });

  it('isolationLevel opens the transaction at that level', async () => {
    let level: string | undefined;
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'iso',
      ...withKnex(
        knex,
        async (_e, { tx }) => {
          level = (await tx.raw('SHOW transaction_isolation')).rows[0].transaction_isolation;
        },
        { isolationLevel: 'repeatable read' },
      ),
    });
    expect(await inbox.process(envelope('iso-1'))).toMatchObject({ status: 'processed' });
    expect(level).toBe('repeatable read');
  });
});

describe('knexRaw', () => {
  it('turns $n into ? in order of appearance, repeats included, and escapes a literal ?', () => {
    expect(
      knexRaw('UPDATE t SET r = $3 WHERE a = $1 AND b = $2 AND c = $1 AND j ? $2', ['a', 'b', 'r']),
    ).toEqual({
      sql: 'UPDATE t SET r = ? WHERE a = ? AND b = ? AND c = ? AND j \\? ?',
      bindings: ['r', 'a', 'b', 'a', 'b'],
    });
    expect(() => knexRaw('SELECT $2', ['x'])).toThrow(/\$2 has no value/);
  });
});
