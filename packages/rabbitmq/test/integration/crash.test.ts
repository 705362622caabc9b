import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type Child,
  createLedger,
  freshDb,
  killAllChildren,
  type Ledger,
  startChild,
} from '../../../../test/support/index.js';
import { amqpAdmin, recordOf, SCALE, sleep, unique, waitFor } from './fixtures/env.js';

const WORKER = fileURLToPath(new URL('./fixtures/worker.mjs', import.meta.url));
let db: Awaited<ReturnType<typeof freshDb>>;
let admin: Awaited<ReturnType<typeof amqpAdmin>>;
const run = unique('rmq-crash');
const queues: string[] = [];

beforeAll(async () => {
  db = await freshDb('rmq_crash', 6);
  admin = await amqpAdmin(run);
});
afterAll(async () => {
  await killAllChildren();
  for (const q of queues) await admin.dropTopology(q);
  await admin.close();
  await db.close();
});

async function setup(name: string) {
  const queue = unique(`${run}-${name}`);
  queues.push(queue);
  await admin.ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  // A schema per scenario: its own ledger and its own inbox tables.
  const schema = `${db.schema}_${name.replace(/-/g, '_')}`.slice(0, 60);
  await db.pool.query(`CREATE SCHEMA ${schema}`);
  const { migrate } = await import('@once/core');
  await migrate(db.pool, { schema });
  const ledger = await createLedger(db.pool, schema);
  return { queue, schema, ledger };
}

function worker(env: Record<string, string>): Child {
  return startChild({ script: WORKER, env });
}

async function distinct(ledger: Ledger): Promise<number> {
  return new Set((await ledger.effects()).map((e) => e.messageId)).size;
}

const N = Math.round(1_500 * SCALE);
const KILLS = 4;

/** Runs the worker, SIGKILLs it KILLS times at random moments, restarts it, waits for all N. */
async function chaos(mode: 'once' | 'naive') {
  const { queue, schema, ledger } = await setup(`kill-${mode}`);
  const ids = Array.from({ length: N }, (_, i) => `${queue}-${i}`);
  await admin.publishMany(
    queue,
    ids.map((id) => ({ body: id, options: { messageId: id } })),
  );
  // The naive control acks 25 ms after its COMMIT (acks gathered on a timer, a common
  // throughput habit): with an immediate ack the commit-to-ack window is so short that four
  // random kills sometimes all miss it, and the control passed by luck once in CI.
  const env = {
    MODE: mode,
    QUEUE: queue,
    SCHEMA: schema,
    PREFETCH: '50',
    CONCURRENCY: '4',
    DELAY_MS: '4',
    ...(mode === 'naive' ? { ACK_DELAY_MS: '25' } : {}),
  };
  const child = worker(env);
  for (let k = 0; k < KILLS; k++) {
    await child.waitForLine(
      (l) => (l.json as { ready?: boolean })?.ready === true && l.run === child.runs - 1,
      30_000,
    );
    await child.killAfterRandom(200, 900);
    child.start();
  }
  await waitFor(async () => (await distinct(ledger)) === N, 120_000, `${mode}: all ${N} effects`);
  await waitFor(async () => (await admin.count(queue)) === 0, 30_000, 'queue empty');
  await sleep(1000);
  await child.kill();
  return { check: await ledger.check({ expectedIds: ids }), runs: child.runs };
}

it(`SIGKILL at random moments ${KILLS} times, restart: exactly once (naive control duplicates)`, async () => {
  const once = await chaos('once');
  expect(once.runs).toBe(KILLS + 1);
  expect(once.check.lost).toEqual([]);
  expect(once.check.duplicated).toEqual([]);
  expect(once.check.ok).toBe(true);

  const naive = await chaos('naive');
  expect(naive.check.lost).toEqual([]);
  expect(naive.check.duplicated.length).toBeGreaterThan(0);
});

it('a poison message that calls process.exit() among 9 good ones in the prefetch window: 9 effects, 1 dead letter', async () => {
  const { queue, schema, ledger } = await setup('exit');
  const ids = Array.from({ length: 10 }, (_, i) => `${queue}-${i}`);
  const poison = ids[4]!;
  await admin.publishMany(
    queue,
    ids.map((id) => ({ body: id, options: { messageId: id } })),
  );
  const env = {
    MODE: 'once',
    QUEUE: queue,
    SCHEMA: schema,
    PREFETCH: '10',
    BATCH: '1',
    POISON_ID: poison,
    MAX_ATTEMPTS: '2',
  };
  const child = worker(env);
  let crashes = 0;
  // Restart it each time it dies, as a supervisor would, until the poison is dead-lettered.
  await waitFor(
    async () => {
      if (!child.running) {
        crashes++;
        child.start();
      }
      return (await admin.count(`${queue}.dead`)) === 1 && (await distinct(ledger)) === 9;
    },
    90_000,
    'poison dead-lettered and 9 effects',
  );
  await sleep(500);
  const check = await ledger.check({ expectedIds: ids.filter((id) => id !== poison) });
  expect(check.ok).toBe(true);
  expect(crashes).toBeGreaterThanOrEqual(2);
  const [dead] = await admin.drain(`${queue}.dead`);
  expect(dead!.properties.messageId).toBe(poison);
  expect(recordOf(dead!)).toMatchObject({
    reason: 'max-attempts',
    error: {
      code: 'ATTEMPTS_EXHAUSTED',
      message: expect.stringMatching(/^started 3 times \(maxAttempts 2\)/),
    },
  });
  await child.kill();

  // The control: a plain consumer with the same poison never gets past it.
  const ctl = await setup('exit-naive');
  await admin.publishMany(
    ctl.queue,
    ids.map((id) => ({ body: id, options: { messageId: id } })),
  );
  const naive = worker({ ...env, MODE: 'naive', QUEUE: ctl.queue, SCHEMA: ctl.schema });
  for (let k = 0; k < 4; k++) {
    await naive.waitForExit(30_000);
    naive.start();
  }
  await naive.waitForExit(30_000);
  expect(await distinct(ctl.ledger)).toBeLessThan(9);
});
