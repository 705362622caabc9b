// fixed clients: kafkajs told it carries no commit metadata (the path @platformatic/kafka takes),
// whatever ONCE_KAFKA_CLIENT says.
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
  message,
  produce,
  readTopic,
  startChild,
  type TestDb,
  uniqueName,
  waitForCommitted,
} from '../../../../test/support/index.js';

// The replay marker of a client without offset-commit metadata, as a PostgreSQL row (schema
// version 11), against real processes that die: kafkajs whose capabilities say it carries no
// metadata (fixtures/row-marker-child.mjs), so the adapter takes the path @platformatic/kafka
// takes. A message whose handler calls process.exit() is dead-lettered after maxAttempts deaths;
// a consumer that stopped cleanly leaves nothing for the next one to run alone.

const script = fileURLToPath(new URL('./fixtures/row-marker-child.mjs', import.meta.url));
const MAX_ATTEMPTS = 2;
let db: TestDb;
let kafka: Kafka;
let admin: Admin;

beforeAll(async () => {
  db = await freshDb('kafka_row_marker', 4);
  kafka = kafkaClient('once-row-marker');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await killAllChildren();
  await admin.disconnect();
  await db.close();
});

const events = (child: Child, name: string) =>
  child.lines
    .map((l) => l.json as { event?: string } & Record<string, unknown>)
    .filter((j) => j?.event === name);

async function committedAt(groupId: string, topic: string, offset: string): Promise<boolean> {
  const [t] = await fetchOffsetsReady(admin, { groupId, topics: [topic] });
  return t?.partitions[0]?.offset === offset;
}

async function inflightEnds(topic: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ end: string }>(
    `SELECT end_offset::text AS end FROM ${db.schema}.inflight WHERE stream = $1`,
    [topic],
  );
  return rows.map((r) => r.end);
}

it('a poison message that exits the process among 9 good ones: the row bounds the replay, 9 effects, 1 dead letter', {
  timeout: 150_000,
}, async () => {
  const topic = uniqueName('row-exit');
  await createTopicsReady(admin, { [topic]: 1, [`${topic}.dlq`]: 1 });
  const ids = Array.from({ length: 10 }, (_, i) => `${topic}-${i}`);
  await produce(
    kafka,
    topic,
    ids.map((id) => message(id, 'k')),
  );
  const poison = ids[4]!;
  const ledger = await db.ledger('row_exit');
  const groupId = uniqueName('g-row');
  const child = startChild({
    script,
    env: {
      TOPIC: topic,
      GROUP: groupId,
      SCHEMA: db.schema,
      LEDGER_SCHEMA: ledger.table.split('.')[0]!.replace(/"/g, ''),
      POISON_ID: poison,
      MAX_ATTEMPTS: String(MAX_ATTEMPTS),
    },
  });
  const done = () => committedAt(groupId, topic, '10');
  while (!(await done()) && child.runs < 1 + MAX_ATTEMPTS + 2) {
    const exit = await Promise.race([
      child.waitForExit(60_000).catch(() => undefined),
      (async () => {
        while (!(await done())) await new Promise((r) => setTimeout(r, 200));
      })(),
    ]);
    if (exit !== undefined && !(await done())) child.start();
  }
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
  // The first run died in its slice, noted 0..9; each later run found the row at or past its
  // committed offset and replayed alone: 0..3 completed, 4 died MAX_ATTEMPTS times, then was refused.
  expect(child.runs).toBe(2 + MAX_ATTEMPTS);
  expect(events(child, 'replay').map((e) => `${e.fromOffset}..${e.toOffset}`)).toEqual([
    '0..9',
    '4..9',
    '4..9',
  ]);
  expect(events(child, 'killed-consumer').map((e) => (e.source as { offset: string }).offset)).toEqual(['4']);
  expect(await inflightEnds(topic)).toEqual(['9']);
  const starts = await db.pool.query<{ message_id: string; starts: number }>(
    `SELECT message_id, starts FROM ${db.schema}.starts WHERE message_id LIKE $1 ORDER BY message_id`,
    [`${topic}-%`],
  );
  // Each message of the range counted once when it completed alone; the poison 3 times.
  expect(
    Object.fromEntries(starts.rows.map((r) => [r.message_id.slice(topic.length + 1), r.starts])),
  ).toEqual({
    '0': 1,
    '1': 1,
    '2': 1,
    '3': 1,
    '4': 3,
    '5': 1,
    '6': 1,
    '7': 1,
    '8': 1,
    '9': 1,
  });
  await child.kill('SIGTERM');
});

it('a clean stop and a fresh start: the row is below the committed offset, nothing runs alone', {
  timeout: 120_000,
}, async () => {
  const topic = uniqueName('row-clean');
  await createTopicsReady(admin, { [topic]: 1 });
  const first = Array.from({ length: 6 }, (_, i) => `${topic}-a${i}`);
  await produce(
    kafka,
    topic,
    first.map((id) => message(id, 'k')),
  );
  const ledger = await db.ledger('row_clean');
  const groupId = uniqueName('g-clean');
  const env = {
    TOPIC: topic,
    GROUP: groupId,
    SCHEMA: db.schema,
    LEDGER_SCHEMA: ledger.table.split('.')[0]!.replace(/"/g, ''),
    BATCH_SIZE: '4',
  };
  // A fresh group: no row, so nothing replays (before this change, the first slice ran alone).
  const a = startChild({ script, env });
  await a.waitForLine((l) => (l.json as { event?: string })?.event === 'started');
  const deadline = Date.now() + 60_000;
  while (!(await committedAt(groupId, topic, '6')) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 200));
  await a.kill('SIGTERM');
  expect(events(a, 'replay')).toEqual([]);
  expect(await inflightEnds(topic)).toEqual(['5']);

  const second = Array.from({ length: 3 }, (_, i) => `${topic}-b${i}`);
  await produce(
    kafka,
    topic,
    second.map((id) => message(id, 'k')),
  );
  const b = startChild({ script, env });
  while (!(await committedAt(groupId, topic, '9')) && Date.now() < deadline + 30_000)
    await new Promise((r) => setTimeout(r, 200));
  expect(events(b, 'replay')).toEqual([]);
  const verdict = await ledger.check({ expectedIds: [...first, ...second], checkOrderPerKey: true });
  expect(verdict.ok).toBe(true);
  expect(await inflightEnds(topic)).toEqual(['8']);
  // Nothing ran alone: a message run alone counts its start (before this change, the first slice
  // of every assignment did, without a replay event).
  const starts = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${db.schema}.starts WHERE message_id LIKE $1`,
    [`${topic}-%`],
  );
  expect(starts.rows[0]!.n).toBe(0);
  await b.kill('SIGTERM');
});
