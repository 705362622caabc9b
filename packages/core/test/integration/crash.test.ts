import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox, type Handler } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

const CHILD = fileURLToPath(new URL('./fixtures/crash-child.mjs', import.meta.url));
let db: Awaited<ReturnType<typeof freshDb>>;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await freshDb('core_crash', 8);
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await db.close();
});

/** Starts the child and resolves once it prints `line`; then SIGKILLs it and waits for exit. */
async function killAt(id: string, mode: string, line: string): Promise<void> {
  const child = spawn(process.execPath, [CHILD, db.schema, id, mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (buf.split('\n').includes(line)) resolve();
    });
    child.on('exit', (code) => reject(new Error(`child exited early with ${code}`)));
  });
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

const effect: Handler = async (e, { tx }) => {
  await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
};
const redeliver = (id: string, handler = effect) =>
  createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'crash',
    handler,
    lockTimeoutMs: 30_000,
  }).process(envelope(id, { body: Buffer.from('{}'), redelivered: true, attempt: 2 }));

it('SIGKILL after the claim and the effect, before COMMIT: nothing remains; the redelivery runs once', async () => {
  await killAt('k1', 'before-commit', 'claimed');
  // The claim waits, if need be, until the server notices the dead backend and rolls it back.
  expect(await redeliver('k1')).toMatchObject({ status: 'processed' });
  expect((await db.counts()).get('k1')).toBe(1);
});

it('SIGKILL after COMMIT, before the ack: the redelivery is a duplicate', async () => {
  await killAt('k2', 'after-commit', 'committed');
  expect(await redeliver('k2')).toMatchObject({ status: 'duplicate' });
  expect((await db.counts()).get('k2')).toBe(1);
});

it('control: an effect written outside the transaction is repeated after the same kill', async () => {
  await killAt('k3', 'naive', 'claimed');
  await redeliver('k3', async (e) => {
    await db.pool.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
  });
  expect((await db.counts()).get('k3')).toBe(2);
});
