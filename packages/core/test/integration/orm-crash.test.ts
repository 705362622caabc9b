import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import type { InboxBinding } from '../../src/handler/binding.js';
import { createInbox } from '../../src/index.js';
import { withKysely } from '../../src/kysely/index.js';
import { envelope } from './fixtures/db.js';

// SIGKILL at the two points that matter, for each binding: after the ORM's write and the claim,
// before COMMIT (nothing may remain; the redelivery runs once), and after the ORM's COMMIT
// resolved, before the broker is settled (the redelivery is a duplicate). Children run the built
// packages (dist/); Prisma's generated TypeScript client is loaded through jiti.
const CHILD = fileURLToPath(new URL('./fixtures/orm-crash-child.mjs', import.meta.url));
let db: Awaited<ReturnType<typeof freshDb>>;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await freshDb('core_orm_crash', 8);
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await db.close();
});

async function killAt(orm: string, id: string, mode: string, line: string): Promise<void> {
  // Prisma's generated client is TypeScript, loaded through jiti; the others run as they are.
  const loader = orm === 'prisma' ? ['--import', 'jiti/register'] : [];
  const child = spawn(process.execPath, [...loader, CHILD, orm, db.schema, id, mode], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (buf.split('\n').includes(line)) resolve();
      else if (buf.includes('outcome ')) reject(new Error(`child: ${buf}`));
    });
    child.on('exit', (code) => reject(new Error(`child exited early with ${code}: ${err}`)));
  });
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

/** The redelivery, in this process: a plain Kysely binding is enough to observe the claim. */
const redeliver = (orm: string, id: string) => {
  const binding: InboxBinding = withKysely<Record<string, { id: string }>>(async (e, { tx }) => {
    await tx.insertInto(`${db.schema}.effects`).values({ id: e.id! }).execute();
  });
  return createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: `crash-${orm}`,
    lockTimeoutMs: 30_000,
    ...binding,
  }).process(envelope(id, { body: Buffer.from('{}'), redelivered: true, attempt: 2 }));
};

describe.each(['prisma', 'typeorm', 'knex', 'mikro-orm', 'kysely', 'drizzle'])('SIGKILL with %s', (orm) => {
  it('after the ORM write and the claim, before COMMIT: nothing remains; the redelivery runs once', async () => {
    const id = `${orm}-before`;
    await killAt(orm, id, 'before-commit', 'claimed');
    expect(await redeliver(orm, id)).toMatchObject({ status: 'processed' });
    expect((await db.counts()).get(id)).toBe(1);
  });

  it("after the ORM's COMMIT resolved, before the settle: the redelivery is a duplicate", async () => {
    const id = `${orm}-after`;
    await killAt(orm, id, 'after-commit', 'committed');
    expect(await redeliver(orm, id)).toMatchObject({ status: 'duplicate' });
    expect((await db.counts()).get(id)).toBe(1);
  });
});
