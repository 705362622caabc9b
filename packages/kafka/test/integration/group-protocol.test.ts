// fixed clients: @platformatic/kafka and kafkajs members in one group, whatever ONCE_KAFKA_CLIENT says.
import { Admin as PlatformaticAdmin } from '@platformatic/kafka';
import type { Admin, Kafka } from 'kafkajs';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  kafkaClient,
  type Ledger,
  message,
  produce,
  sleep,
  type TestDb,
  uniqueName,
  waitFor,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { testBrokers } from '../../../../test/support/kafka-client.mjs';
import type { GroupConsumer, GroupJoin, KafkaClient, PartitionBatch } from '../../src/client/types.js';
import { createKafkaConsumer, type KafkaConsumer } from '../../src/index.js';
import { kafkajs } from '../../src/kafkajs.js';
import { platformatic } from '../../src/platformatic.js';

// Consumer groups on @platformatic/kafka, always run (real Kafka 4.x, real PostgreSQL): a mixed
// group, a classic kafkajs member beside KIP-848 platformatic members; the rebalance storm under
// KIP-848 and under the classic protocol ({@link storm}). Effects once per id come from the
// claim in PostgreSQL; the client's part is checked at the seam: no commit for a partition once the
// member's own view says it was revoked, and the group's offsets reach the end.

let db: TestDb;
let kafka: Kafka;
let admin: Admin;
const running = new Set<KafkaConsumer>();

beforeAll(async () => {
  db = await freshDb('kafka_group_protocol', 8);
  kafka = kafkaClient('once-group-protocol');
  admin = kafka.admin();
  await admin.connect();
});
afterEach(async () => {
  await Promise.allSettled([...running].map((c) => c.stop()));
  running.clear();
});
afterAll(async () => {
  await admin.disconnect();
  await db.close();
});

/** What one member did, as seen at the seam. */
interface Trace {
  member: string;
  joins: { at: number; assignment: Record<string, number[]> }[];
  commits: { topic: string; partition: number; calledAt: number; doneAt: number; ok: boolean }[];
}

/** Whether the member's latest join before `at` gave it the partition. */
function ownedAt(trace: Trace, topic: string, partition: number, at: number): boolean {
  let owned = false;
  for (const j of trace.joins) if (j.at <= at) owned = j.assignment[topic]?.includes(partition) ?? false;
  return owned;
}

/** Wraps a client so that every member's joins and commits are recorded (our own seam, not the library). */
function traced(client: KafkaClient, traces: Trace[], member: string): KafkaClient {
  const trace: Trace = { member, joins: [], commits: [] };
  traces.push(trace);
  return {
    ...client,
    consumer: (config) => {
      const inner: GroupConsumer = client.consumer(config);
      return {
        ...inner,
        connect: () => inner.connect(),
        subscribe: (t, f) => inner.subscribe(t, f),
        onGroupJoin: (listener) =>
          inner.onGroupJoin((e: GroupJoin) => {
            trace.joins.push({ at: performance.now(), assignment: structuredClone(e.assignment) });
            listener(e);
          }),
        onCrash: (l) => inner.onCrash(l),
        pause: (t, p) => inner.pause(t, p),
        resume: (t, p) => inner.resume(t, p),
        seek: (t, p, o) => inner.seek(t, p, o),
        stop: () => inner.stop(),
        disconnect: () => inner.disconnect(),
        run: ({ concurrency, eachBatch }) =>
          inner.run({
            concurrency,
            eachBatch: (batch: PartitionBatch) =>
              eachBatch({
                ...batch,
                topic: batch.topic,
                partition: batch.partition,
                messages: batch.messages,
                lastOffset: () => batch.lastOffset(),
                isRunning: () => batch.isRunning(),
                isStale: () => batch.isStale(),
                heartbeat: () => batch.heartbeat(),
                resolveOffset: (o) => batch.resolveOffset(o),
                commit: async (next, metadata) => {
                  const calledAt = performance.now();
                  try {
                    await batch.commit(next, metadata);
                    trace.commits.push({
                      topic: batch.topic,
                      partition: batch.partition,
                      calledAt,
                      doneAt: performance.now(),
                      ok: true,
                    });
                  } catch (err) {
                    trace.commits.push({
                      topic: batch.topic,
                      partition: batch.partition,
                      calledAt,
                      doneAt: performance.now(),
                      ok: false,
                    });
                    throw err;
                  }
                },
              }),
          }),
      };
    },
  };
}

function platformaticClient(protocol: 'consumer' | 'classic', clientId: string): KafkaClient {
  return platformatic(
    { clientId, bootstrapBrokers: testBrokers(), retries: 8, retryDelay: 100 },
    protocol === 'consumer' ? { consumer: { groupProtocol: 'consumer' }, groupTimeouts: true } : {},
  );
}

function member(kafkaClientOf: KafkaClient, groupId: string, topic: string, ledger: Ledger): KafkaConsumer {
  const c = createKafkaConsumer({
    kafka: kafkaClientOf,
    groupId,
    topics: [topic],
    pool: db.pool,
    schema: db.schema,
    fromBeginning: true,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    rebalanceTimeoutMs: 10_000,
    handler: async (envelope, { tx, id }) => {
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: kafkaClientOf.name });
    },
  });
  running.add(c);
  return c;
}

/** `n` ids over 24 keys, every fifth id sent twice more (later, under another key). */
function withDuplicates(prefix: string, n: number) {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  const messages = ids.map((id, i) => message(id, `k${i % 24}`));
  for (let i = 0; i < n; i += 5) {
    messages.push(message(ids[i]!, `k${(i + 7) % 24}`));
    messages.push(message(ids[i]!, `k${(i + 13) % 24}`));
  }
  return { ids, messages };
}

/** No commit that succeeded was made by a member whose own latest join had already taken the partition away. */
function lateCommits(traces: Trace[]) {
  return traces.flatMap((t) =>
    t.commits
      .filter((c) => c.ok && !ownedAt(t, c.topic, c.partition, c.calledAt))
      .map((c) => ({ member: t.member, ...c })),
  );
}

/**
 * The rebalance storm (members joining and leaving while 3,000 ids with 1,200 duplicates are
 * consumed; once per id, offsets to the end, no commit after a known revocation), under KIP-848 or
 * the classic protocol.
 */
async function storm(protocol: 'consumer' | 'classic'): Promise<void> {
  const topic = uniqueName(`storm-${protocol}`);
  await createTopicsReady(admin, { [topic]: 6 });
  const groupId = uniqueName(`g-storm-${protocol}`);
  const ledger = await db.ledger(`storm_${protocol}`);
  const { ids, messages } = withDuplicates(uniqueName('s'), 3_000);
  const traces: Trace[] = [];
  let serial = 0;
  const members: KafkaConsumer[] = [];
  const join = async () => {
    const name = `m${serial++}`;
    const c = member(
      traced(platformaticClient(protocol, `storm-${name}`), traces, name),
      groupId,
      topic,
      ledger,
    );
    members.push(c);
    await c.start();
  };
  const leave = async () => {
    // The oldest member leaves gracefully (finishes its slice, commits, leaves the group).
    const c = members.shift()!;
    await c.stop();
    running.delete(c);
  };
  const third = Math.floor(messages.length / 3);
  await produce(kafka, topic, messages.slice(0, third));
  await join();
  await join();
  // Members come and go while the rest is produced: 8 membership changes, 2-4 members at once.
  const plan: ('join' | 'leave')[] = ['join', 'leave', 'join', 'join', 'leave', 'leave', 'join', 'leave'];
  for (const [i, step] of plan.entries()) {
    if (i === 2) await produce(kafka, topic, messages.slice(third, 2 * third));
    if (i === 5) await produce(kafka, topic, messages.slice(2 * third));
    await (step === 'join' ? join() : leave());
    await sleep(1_000);
  }
  await waitForCommitted(admin, groupId, topic, 60_000);
  while (members.length > 0) await leave();

  const verdict = await ledger.check({ expectedIds: ids });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated).toEqual([]);
  expect(verdict.unexpected).toEqual([]);
  expect(verdict.ok).toBe(true);
  expect(lateCommits(traces)).toEqual([]);
  // The storm moved partitions: several members received work, and some saw a revocation.
  const joinedWithWork = traces.filter((t) => t.joins.some((j) => (j.assignment[topic]?.length ?? 0) > 0));
  expect(joinedWithWork.length).toBeGreaterThanOrEqual(4);
  const sawRevocation = traces.filter((t) =>
    t.joins.some(
      (j, k) =>
        k > 0 && (t.joins[k - 1]!.assignment[topic] ?? []).some((p) => !j.assignment[topic]?.includes(p)),
    ),
  );
  expect(sawRevocation.length).toBeGreaterThan(0);
}

it(
  'the rebalance storm under KIP-848: exactly once, offsets to the end, no commit after a known revocation',
  {
    timeout: 150_000,
  },
  () => storm('consumer'),
);

it(
  'the rebalance storm under the classic protocol: exactly once, offsets to the end, no commit after a known revocation',
  {
    timeout: 150_000,
  },
  () => storm('classic'),
);

it('a mixed group: a classic kafkajs once member beside KIP-848 platformatic once members, exactly once', {
  timeout: 90_000,
}, async () => {
  const topic = uniqueName('mixed');
  await createTopicsReady(admin, { [topic]: 6 });
  const groupId = uniqueName('g-mixed');
  const ledger = await db.ledger('mixed');
  const { ids, messages } = withDuplicates(uniqueName('x'), 1_500);
  const traces: Trace[] = [];
  // A KIP-848 member first: a classic join then joins the consumer group (Kafka 4 converts it).
  const p1 = member(traced(platformaticClient('consumer', 'mixed-p1'), traces, 'p1'), groupId, topic, ledger);
  await p1.start();
  const k = member(traced(kafkajs(kafkaClient('mixed-kafkajs')), traces, 'kafkajs'), groupId, topic, ledger);
  await k.start();
  const p2 = member(traced(platformaticClient('consumer', 'mixed-p2'), traces, 'p2'), groupId, topic, ledger);
  await p2.start();
  await waitFor(
    'all three members to own partitions',
    () => [p1, k, p2].every((c) => (c.health().assignment[topic]?.length ?? 0) > 0),
    45_000,
  );
  // The group stayed a KIP-848 group with the classic member in it.
  const pltAdmin = new PlatformaticAdmin({ clientId: 'mixed-admin', bootstrapBrokers: testBrokers() });
  const groups = await pltAdmin
    .listGroups({ types: ['consumer', 'classic'] })
    .finally(() => pltAdmin.close());
  await produce(kafka, topic, messages);
  await waitForCommitted(admin, groupId, topic, 60_000);
  for (const c of [p1, k, p2]) await c.stop();

  const verdict = await ledger.check({ expectedIds: ids });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated).toEqual([]);
  expect(verdict.ok).toBe(true);
  expect(lateCommits(traces)).toEqual([]);
  // Both kinds of member did part of the work.
  const writers = new Set((await ledger.effects()).map((e) => e.payload));
  expect(writers).toEqual(new Set(['platformatic', 'kafkajs']));
  expect(groups.get(groupId)?.groupType).toBe('consumer');
});
