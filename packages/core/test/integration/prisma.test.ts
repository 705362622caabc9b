import { PrismaPg } from '@prisma/adapter-pg';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { withPrisma } from '../../src/prisma/index.js';
import { envelope } from './fixtures/db.js';
import { ormSuite } from './fixtures/orm-suite.js';
import { type Prisma, PrismaClient } from './fixtures/prisma/generated/client.js';

// Prisma's default maxWait (2 s to get a connection) is short on a loaded test machine: a miss is
// a setup fault (`not-run`), which would stall the scenarios rather than test them.
const LOADED = { maxWait: 30_000 };
let db: Awaited<ReturnType<typeof freshDb>>;
let prisma: PrismaClient;
beforeAll(async () => {
  db = await freshDb('core_prisma', 48);
  // Prisma 7's client without the Rust engine, on the test's own pg pool.
  prisma = new PrismaClient({ adapter: new PrismaPg(db.pool, { schema: db.schema }) });
});
afterAll(async () => {
  await prisma.$disconnect();
  await db.close();
});

describe('@once/core/prisma (Prisma opens the transaction)', () => {
  ormSuite({
    name: 'prisma',
    db: () => db,
    effect: (opts = {}) =>
      withPrisma(
        prisma,
        async (e, { tx }) => {
          await tx.effect.create({ data: { id: e.id! } });
          await opts.after?.(e.id!);
          return e.id;
        },
        LOADED,
      ),
    outside: () =>
      withPrisma(prisma, async (e) => {
        await prisma.effect.create({ data: { id: e.id! } });
      }),
    late: (sleepMs, seen) =>
      withPrisma(prisma, async (e, { tx }) => {
        await tx.effect.create({ data: { id: e.id! } });
        await new Promise((r) => setTimeout(r, sleepMs));
        await tx.effect.create({ data: { id: `${e.id}-late` } }).then(
          () => seen(undefined),
          (err: unknown) => seen(err),
        );
      }),
  });

  it('types: the handler receives Prisma.TransactionClient', () => {
    withPrisma(prisma, async (_e, { tx }) => {
      // What Prisma's own `$transaction(async (tx) => ...)` hands you.
      expectTypeOf(tx).toEqualTypeOf<Prisma.TransactionClient>();
      expectTypeOf(tx.effect.create).toBeFunction();
    });
  });

  it('the claim and a Prisma write commit together; ctx.tx is still a raw handle', async () => {
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'raw',
      ...withPrisma(prisma, async (e, { tx }) => {
        await tx.effect.create({ data: { id: e.id! } });
      }),
    });
    expect(await inbox.process(envelope('r1'))).toMatchObject({ status: 'processed' });
    const row = await db.pool.query(
      `SELECT count(*)::int AS n FROM ${db.schema}.inbox WHERE consumer = 'raw'`,
    );
    expect(row.rows[0].n).toBe(1);
  });
});
