import { fileURLToPath } from 'node:url';
import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type Child,
  createTopicsReady,
  freshDb,
  kafkaClient,
  killAllChildren,
  type Ledger,
  message,
  produce,
  SCALE,
  startChild,
  type TestDb,
  uniqueName,
  waitForCommitted,
} from '../../../../test/support/index.js';

// SIGKILL the consumer process at random moments while it works through the topic, restart it
// each time: every id must have exactly one effect and none may be missing. The same storm on a
// plain kafkajs consumer (effect, then auto-commit after the batch) must repeat effects.

const script = fileURLToPath(new URL('./fixtures/consumer-child.mjs', import.meta.url));
const N = Math.round(Number(process.env.ONCE_CHAOS_MESSAGES ?? 20_000) * SCALE);
const KILLS = 5;
let db: TestDb;
let kafka: Kafka;
let admin: Admin;

beforeAll(async () => {
  db = await freshDb('kafka_chaos', 4);
  kafka = kafkaClient('once-chaos');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await killAllChildren();
  await admin.disconnect();
  await db.close();
});

async function topicWith(name: string): Promise<{ topic: string; ids: string[] }> {
  const topic = uniqueName(name);
  await createTopicsReady(admin, { [topic]: 6 });
  const ids = Array.from({ length: N }, (_, i) => `${topic}-${i}`);
  await produce(
    kafka,
    topic,
    ids.map((id, i) => message(id, `k${i % 60}`)),
  );
  return { topic, ids };
}

/** Kills the child KILLS times at random moments once it has started and made some progress. */
async function storm(child: Child, ledger: Ledger): Promise<number[]> {
  const at: number[] = [];
  for (let k = 0; k < KILLS; k++) {
    const run = child.runs - 1;
    await child.waitForLine(
      (l) => l.run === run && (l.json as { event?: string })?.event === 'started',
      60_000,
    );
    const count = async () =>
      Number((await db.pool.query(`SELECT count(*) AS n FROM ${ledger.table}`)).rows[0].n);
    const before = await count();
    // Wait for work to be under way in this run, then kill at a random moment of it.
    const until = Date.now() + 30_000;
    while ((await count()) === before && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    const { afterMs } = await child.killAfterRandom(0, 300);
    at.push(afterMs);
    child.start();
  }
  return at;
}

const ledgerSchema = (ledger: Ledger) => ledger.table.split('.')[0]!.replace(/"/g, '');

it(`inbox rows, SIGKILLed ${KILLS} times while consuming ${N} messages: every id has exactly one effect`, {
  timeout: 240_000,
}, async () => {
  const { topic, ids } = await topicWith('chaos-once');
  const ledger = await db.ledger('once');
  const groupId = uniqueName('g-once');
  const child = startChild({
    script,
    env: {
      CONSUMER: 'once',
      TOPIC: topic,
      GROUP: groupId,
      SCHEMA: db.schema,
      LEDGER_SCHEMA: ledgerSchema(ledger),
    },
  });
  await storm(child, ledger);
  await waitForCommitted(admin, groupId, topic, 180_000);
  const verdict = await ledger.check({ expectedIds: ids, checkOrderPerKey: true });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated).toEqual([]);
  expect(verdict.ok).toBe(true);
  expect(child.runs).toBe(KILLS + 1);
  // The path under test really ran: an inbox row per message.
  const q = (sql: string) => db.pool.query(sql).then((r) => Number(r.rows[0].n));
  expect(await q(`SELECT count(*) AS n FROM "${db.schema}".inbox WHERE message_id LIKE '${topic}-%'`)).toBe(
    N,
  );
  await child.kill('SIGTERM');
});

it('control: a plain kafkajs consumer under the same storm repeats effects', {
  timeout: 240_000,
}, async () => {
  const { topic, ids } = await topicWith('chaos-naive');
  const ledger = await db.ledger('naive');
  const groupId = uniqueName('g-naive');
  const child = startChild({
    script,
    env: { CONSUMER: 'naive', TOPIC: topic, GROUP: groupId, LEDGER_SCHEMA: ledgerSchema(ledger) },
  });
  await storm(child, ledger);
  await waitForCommitted(admin, groupId, topic, 180_000);
  const verdict = await ledger.check({ expectedIds: ids });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated.length).toBeGreaterThan(0);
  expect(verdict.ok).toBe(false);
});
