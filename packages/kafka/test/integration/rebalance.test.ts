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
  waitFor,
  waitForCommitted,
} from '../../../../test/support/index.js';

// Two consumer processes in one group over 6 partitions; a third joins mid-stream, then one
// leaves on SIGTERM. once's consumer stops gracefully (finishes its slice, commits, leaves); the
// plain kafkajs control, like most apps, has no SIGTERM handler and dies mid-batch. Either way the
// partitions move twice while messages are in flight.

const script = fileURLToPath(new URL('./fixtures/consumer-child.mjs', import.meta.url));
const N = Math.round(Number(process.env.ONCE_REBALANCE_MESSAGES ?? 20_000) * SCALE);
let db: TestDb;
let kafka: Kafka;
let admin: Admin;

beforeAll(async () => {
  db = await freshDb('kafka_rebalance', 4);
  kafka = kafkaClient('once-rebalance');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await killAllChildren();
  await admin.disconnect();
  await db.close();
});

const ledgerSchema = (ledger: Ledger) => ledger.table.split('.')[0]!.replace(/"/g, '');

async function scenario(
  kind: 'once' | 'naive',
): Promise<{ ids: string[]; ledger: Ledger; members: Child[] }> {
  const topic = uniqueName(`rebalance-${kind}`);
  await createTopicsReady(admin, { [topic]: 6 });
  const ids = Array.from({ length: N }, (_, i) => `${topic}-${i}`);
  const messages = ids.map((id, i) => message(id, `k${i % 60}`));
  const half = Math.floor(N / 2);
  // The second half is produced only once the third member owns partitions, so both membership
  // changes happen with messages in flight however fast the first two members are.
  await produce(kafka, topic, messages.slice(0, half));
  const ledger = await db.ledger(kind);
  const groupId = uniqueName(`g-${kind}`);
  const env = {
    CONSUMER: kind,
    TOPIC: topic,
    GROUP: groupId,
    SCHEMA: db.schema,
    LEDGER_SCHEMA: ledgerSchema(ledger),
  };
  const count = async () =>
    Number((await db.pool.query(`SELECT count(*) AS n FROM ${ledger.table}`)).rows[0].n);
  const wrote = async (member: Child) =>
    Number(
      (
        await db.pool.query(`SELECT count(*) AS n FROM ${ledger.table} WHERE payload = $1`, [
          String(member.process?.pid),
        ])
      ).rows[0].n,
    ) > 0;
  const a = startChild({ script, env });
  const b = startChild({ script, env });
  await waitFor('20% of the effects', async () => (await count()) >= N * 0.2, 120_000);
  const c = startChild({ script, env });
  // 'joined' with partitions of the topic: the eager rebalance that let the third member in is over.
  await c.waitForLine((l) => {
    const assignment = (l.json as { event?: string; assignment?: Record<string, number[]> })?.assignment;
    return (assignment?.[topic]?.length ?? 0) > 0;
  }, 120_000);
  await produce(kafka, topic, messages.slice(half));
  await waitFor('the third member to take work', () => wrote(c), 120_000);
  await waitFor('60% of the effects', async () => (await count()) >= N * 0.6, 120_000);
  await a.kill('SIGTERM');
  await waitForCommitted(admin, groupId, topic, 180_000);
  return { ids, ledger, members: [a, b, c] };
}

it(`two members, a third joins, one leaves: exactly once for ${N} messages over 6 partitions, order per key kept`, {
  timeout: 240_000,
}, async () => {
  const { ids, ledger, members } = await scenario('once');
  const verdict = await ledger.check({ expectedIds: ids, checkOrderPerKey: true });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated).toEqual([]);
  expect(verdict.orderViolations).toEqual([]);
  expect(verdict.ok).toBe(true);
  // The member that left did so gracefully, and all three did part of the work.
  const exit = await members[0]!.waitForExit();
  expect(exit.code).toBe(0);
  const writers = (await ledger.effects()).reduce((s, e) => s.add(e.payload), new Set<string>());
  expect(writers.size).toBe(3);
});

it('control: plain kafkajs members under the same membership changes repeat effects', {
  timeout: 240_000,
}, async () => {
  const { ids, ledger } = await scenario('naive');
  const verdict = await ledger.check({ expectedIds: ids });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated.length).toBeGreaterThan(0);
});
