import { fileURLToPath } from 'node:url';
import { DEAD_LETTER_RECORD, decodeDeadLetterRecord } from '@once/core/adapter';
import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type Child,
  createTopicsReady,
  fetchOffsetsReady,
  freshDb,
  header,
  kafkaClient,
  killAllChildren,
  type Ledger,
  message,
  produce,
  readTopic,
  startChild,
  type TestDb,
  uniqueName,
  waitForCommitted,
} from '../../../../test/support/index.js';

// A message whose handler calls process.exit() never reaches a catch block. Kafka counts no
// deliveries, so the consumer notes each slice's offset range in the committed offset's metadata
// before running it; after a restart it replays that range one message per transaction and counts
// how often the process died on each one. The culprit is dead-lettered after maxAttempts deaths.

const script = fileURLToPath(new URL('./fixtures/consumer-child.mjs', import.meta.url));
const MAX_ATTEMPTS = 2;
let db: TestDb;
let kafka: Kafka;
let admin: Admin;

beforeAll(async () => {
  db = await freshDb('kafka_poison_exit', 4);
  kafka = kafkaClient('once-poison-exit');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await killAllChildren();
  await admin.disconnect();
  await db.close();
});

/** Runs the child, starting it again each time it dies, until `done` or `maxRuns` runs. */
async function runUntil(child: Child, done: () => Promise<boolean>, maxRuns: number): Promise<void> {
  while (!(await done()) && child.runs < maxRuns) {
    const exit = await Promise.race([
      child.waitForExit(60_000).catch(() => undefined),
      (async () => {
        while (!(await done())) await new Promise((r) => setTimeout(r, 200));
      })(),
    ]);
    if (exit !== undefined && !(await done())) child.start();
  }
}

async function setup(
  name: string,
): Promise<{ topic: string; ids: string[]; poison: string; ledger: Ledger }> {
  const topic = uniqueName(name);
  await createTopicsReady(admin, { [topic]: 1, [`${topic}.dlq`]: 1 });
  const ids = Array.from({ length: 10 }, (_, i) => `${topic}-${i}`);
  // One produce call: the ten land in one record batch, so the first fetch hands over all ten.
  await produce(
    kafka,
    topic,
    ids.map((id) => message(id, 'k')),
  );
  return { topic, ids, poison: ids[4]!, ledger: await db.ledger(name.replace(/-/g, '_')) };
}

it('a poison message that exits the process among 9 good ones: 9 effects, 1 dead letter', {
  timeout: 150_000,
}, async () => {
  const { topic, ids, poison, ledger } = await setup('exit-once');
  const groupId = uniqueName('g-once');
  const child = startChild({
    script,
    env: {
      CONSUMER: 'once',
      TOPIC: topic,
      GROUP: groupId,
      SCHEMA: db.schema,
      LEDGER_SCHEMA: ledger.table.split('.')[0]!.replace(/"/g, ''),
      POISON_ID: poison,
      MAX_ATTEMPTS: String(MAX_ATTEMPTS),
    },
  });
  const committed = async () => {
    const [t] = await fetchOffsetsReady(admin, { groupId, topics: [topic] });
    return t?.partitions[0]?.offset === '10';
  };
  await runUntil(child, committed, 1 + MAX_ATTEMPTS + 2);
  await waitForCommitted(admin, groupId, topic);

  const verdict = await ledger.check({
    expectedIds: ids.filter((id) => id !== poison),
    checkOrderPerKey: true,
  });
  expect(verdict.ok).toBe(true);
  const dead = await readTopic(kafka, `${topic}.dlq`, 1, 10_000);
  expect(dead.map((m) => header(m, 'message-id'))).toEqual([poison]);
  expect(decodeDeadLetterRecord(header(dead[0]!, DEAD_LETTER_RECORD))).toMatchObject({
    reason: 'max-attempts',
    error: { code: 'ATTEMPTS_EXHAUSTED' },
  });
  // The first run died in the batch; then the range was replayed alone, and the culprit died MAX_ATTEMPTS times.
  expect(child.runs).toBe(2 + MAX_ATTEMPTS);
  const killed = child.lines.filter((l) => (l.json as { event?: string })?.event === 'killed-consumer');
  expect(killed.map((l) => (l.json as { source: { offset: string } }).source.offset)).toEqual(['4']);
  await child.kill('SIGTERM');
});

it('the poison dies beside an innocent message of another partition: only the poison is dead-lettered', {
  timeout: 200_000,
}, async () => {
  const topic = uniqueName('exit-two');
  await createTopicsReady(admin, { [topic]: 2, [`${topic}.dlq`]: 1 });
  const ids = [0, 1].flatMap((p) => Array.from({ length: 5 }, (_, i) => `${topic}-p${p}-${i}`));
  // One produce call, each message pinned to its partition: both partitions are fetched at once.
  await produce(
    kafka,
    topic,
    ids.map((id) => ({ ...message(id, 'k'), partition: id.includes('-p0-') ? 0 : 1 })),
  );
  const poison = `${topic}-p0-2`;
  const innocent = `${topic}-p1-0`;
  const ledger = await db.ledger('exit_two');
  const groupId = uniqueName('g-two');
  const child = startChild({
    script,
    env: {
      CONSUMER: 'once',
      TOPIC: topic,
      GROUP: groupId,
      SCHEMA: db.schema,
      LEDGER_SCHEMA: ledger.table.split('.')[0]!.replace(/"/g, ''),
      POISON_ID: poison,
      INNOCENT_ID: innocent,
      MAX_ATTEMPTS: String(MAX_ATTEMPTS),
    },
  });
  const committed = async () => {
    const [t] = await fetchOffsetsReady(admin, { groupId, topics: [topic] });
    return (t?.partitions ?? []).filter((p) => p.offset === '5').length === 2;
  };
  await runUntil(child, committed, 2 + MAX_ATTEMPTS + 2);
  await waitForCommitted(admin, groupId, topic);

  // The innocent message ran beside the poison when the process died the first time; replayed,
  // it runs alone, completes, and no death is counted against it.
  const verdict = await ledger.check({ expectedIds: ids.filter((id) => id !== poison) });
  expect(verdict.lost).toEqual([]);
  expect(verdict.ok).toBe(true);
  const dead = await readTopic(kafka, `${topic}.dlq`, 2, 5_000);
  expect(dead.map((m) => header(m, 'message-id'))).toEqual([poison]);
  expect(decodeDeadLetterRecord(header(dead[0]!, DEAD_LETTER_RECORD))).toMatchObject({
    reason: 'max-attempts',
    error: { code: 'ATTEMPTS_EXHAUSTED' },
  });
  const killed = child.lines.filter((l) => (l.json as { event?: string })?.event === 'killed-consumer');
  expect(killed.map((l) => (l.json as { source: { offset: string } }).source.offset)).toEqual(['2']);
  // Starts are counted in Postgres: the poison's rose with each death, the innocent's once at most.
  const starts = new Map(
    (
      await db.pool.query<{ message_id: string; starts: number }>(
        `SELECT message_id, starts FROM ${db.schema}.starts WHERE consumer = $1`,
        [groupId],
      )
    ).rows.map((r) => [r.message_id, r.starts]),
  );
  expect(starts.get(poison)).toBe(MAX_ATTEMPTS + 1);
  expect(starts.get(innocent) ?? 0).toBeLessThanOrEqual(1);
  await child.kill('SIGTERM');
});

it('control: a plain kafkajs consumer never gets past the poison', { timeout: 150_000 }, async () => {
  const { topic, ids, poison, ledger } = await setup('exit-naive');
  const groupId = uniqueName('g-naive');
  const child = startChild({
    script,
    env: {
      CONSUMER: 'naive',
      TOPIC: topic,
      GROUP: groupId,
      LEDGER_SCHEMA: ledger.table.split('.')[0]!.replace(/"/g, ''),
      POISON_ID: poison,
    },
  });
  // As many starts as once needed: the naive consumer dies on the poison every time.
  await runUntil(child, async () => false, 2 + MAX_ATTEMPTS);
  await child.waitForExit(60_000);
  const verdict = await ledger.check({ expectedIds: ids.filter((id) => id !== poison) });
  expect(verdict.ok).toBe(false);
  expect(verdict.lost).toEqual(ids.slice(5));
});
