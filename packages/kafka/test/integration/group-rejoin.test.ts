// fixed clients: a once consumer on @platformatic/kafka (classic protocol) whatever ONCE_KAFKA_CLIENT says, and a kafkajs blocker.
import { Admin as PlatformaticAdmin } from '@platformatic/kafka';
import { type Admin, AssignerProtocol, type Consumer, type Kafka, type PartitionAssigner } from 'kafkajs';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  kafkaClient,
  message,
  produce,
  type TestDb,
  uniqueName,
  waitFor,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { testBrokers } from '../../../../test/support/kafka-client.mjs';
import type { GroupConsumer, KafkaClient, PartitionBatch } from '../../src/client/types.js';
import { createKafkaConsumer, type KafkaConsumer } from '../../src/index.js';
import { platformatic } from '../../src/platformatic.js';

// The group supervisor of the @platformatic/kafka client (superviseGroup) against the real broker.
// Under the classic protocol, when the library's heartbeat is told to rejoin and that rejoin fails
// with an error it does not retry, the library emits `error` and heartbeats no more; once reports
// it, drops the whole assignment and joins again with backoff until a join succeeds. Here the
// member is removed from its group by an admin and a kafkajs blocker joins at once, offering only a
// partition assignor the platformatic member does not: every join of the member then fails with
// INCONSISTENT_GROUP_PROTOCOL until the blocker leaves. Effects once per id come from the claim in
// PostgreSQL; the group's offsets must reach the end once the member is back.

let db: TestDb;
let kafka: Kafka;
let admin: Admin;
const running = new Set<KafkaConsumer>();
const blockers = new Set<Consumer>();

beforeAll(async () => {
  db = await freshDb('kafka_group_rejoin', 4);
  kafka = kafkaClient('once-group-rejoin');
  admin = kafka.admin();
  await admin.connect();
});
afterEach(async () => {
  await Promise.allSettled([...blockers].map((b) => b.disconnect()));
  blockers.clear();
  await Promise.allSettled([...running].map((c) => c.stop()));
  running.clear();
});
afterAll(async () => {
  await admin.disconnect();
  await db.close();
});

/** A partition assignor by a name no other client offers: the group's protocol while it is a member. */
const BLOCKER_PROTOCOL = 'once-test-blocker';
const blockerAssigner: PartitionAssigner = () => ({
  name: BLOCKER_PROTOCOL,
  version: 1,
  protocol: ({ topics }) => ({
    name: BLOCKER_PROTOCOL,
    metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }),
  }),
  // Nothing of the dummy topic is wanted either: every member gets an empty assignment.
  assign: async ({ members }) =>
    members.map((m) => ({
      memberId: m.memberId,
      memberAssignment: AssignerProtocol.MemberAssignment.encode({
        version: 1,
        assignment: {},
        userData: Buffer.alloc(0),
      }),
    })),
});

/**
 * The client with every batch it hands to once seen first by `onBatch` (our own seam, not the
 * library): the once consumer refuses a batch of a partition it no longer owns, so only here does
 * a fetch that went on after the membership was lost show.
 */
function watched(client: KafkaClient, onBatch: (batch: PartitionBatch) => void): KafkaClient {
  return {
    ...client,
    consumer: (config) => {
      const inner: GroupConsumer = client.consumer(config);
      return {
        connect: () => inner.connect(),
        subscribe: (t, f) => inner.subscribe(t, f),
        onGroupJoin: (l) => inner.onGroupJoin(l),
        onCrash: (l) => inner.onCrash(l),
        pause: (t, p) => inner.pause(t, p),
        resume: (t, p) => inner.resume(t, p),
        seek: (t, p, o) => inner.seek(t, p, o),
        stop: () => inner.stop(),
        disconnect: () => inner.disconnect(),
        run: ({ concurrency, eachBatch }) =>
          inner.run({
            concurrency,
            eachBatch: (batch) => {
              onBatch(batch);
              return eachBatch(batch);
            },
          }),
      };
    },
  };
}

/**
 * Removes `memberId`, the group's only member, through @platformatic/kafka's Admin and joins a
 * blocker at once: the blocker if the group is then its own (its protocol, its one member), or
 * undefined, the blocker gone again, if the member's rejoin came first and the blocker was refused.
 */
async function blockGroup(
  groupId: string,
  dummy: string,
  memberId: string | undefined,
): Promise<Consumer | undefined> {
  const blocker = kafka.consumer({
    groupId,
    partitionAssigners: [blockerAssigner],
    sessionTimeout: 30_000,
    retry: { retries: 0, restartOnFailure: async () => false },
  });
  blockers.add(blocker);
  await blocker.connect();
  await blocker.subscribe({ topics: [dummy], fromBeginning: true });
  const pltAdmin = new PlatformaticAdmin({ clientId: 'group-rejoin-admin', bootstrapBrokers: testBrokers() });
  try {
    const members = [
      ...((await pltAdmin.describeGroups({ groups: [groupId] })).get(groupId)?.members.keys() ?? []),
    ];
    expect(members).toEqual([memberId]);
    await pltAdmin.removeMembersFromConsumerGroup({
      groupId,
      members: members.map((id) => ({ memberId: id, reason: 'once test: rejoin' })),
    });
    // Resolves joined, or after the blocker's crash (refused: the member was back first).
    await blocker.run({ eachMessage: async () => {} });
    const group = (await pltAdmin.describeGroups({ groups: [groupId] })).get(groupId);
    if (group?.protocol === BLOCKER_PROTOCOL && group.members.size === 1) return blocker;
  } finally {
    await pltAdmin.close();
  }
  await blocker.disconnect();
  blockers.delete(blocker);
  return undefined;
}

it('a member the group dropped and whose rejoins fail is reported, holds nothing, and rejoins once it can: exactly once, offsets to the end', {
  timeout: 240_000,
}, async () => {
  const topic = uniqueName('rejoin');
  const dummy = uniqueName('rejoin-blocker');
  await createTopicsReady(admin, { [topic]: 3, [dummy]: 1 });
  const groupId = uniqueName('g-rejoin');
  const ledger = await db.ledger('rejoin');
  const prefix = uniqueName('r');
  const before = Array.from({ length: 300 }, (_, i) => `${prefix}-a${i}`);
  const during = Array.from({ length: 300 }, (_, i) => `${prefix}-b${i}`);

  // Set from the first crash report to the next join: the member holds no membership.
  let outOfGroup = false;
  const batchesWhileOut: string[] = [];
  const consumer = createKafkaConsumer({
    kafka: watched(
      platformatic({
        clientId: 'group-rejoin',
        bootstrapBrokers: testBrokers(),
        retries: 8,
        retryDelay: 100,
      }),
      (b) => {
        if (outOfGroup) batchesWhileOut.push(`${b.topic}/${b.partition}@${b.messages[0]?.offset}`);
      },
    ),
    groupId,
    topics: [topic],
    pool: db.pool,
    schema: db.schema,
    fromBeginning: true,
    // A slow heartbeat: the blocker must be in the group before the member's next heartbeat learns
    // that it was removed, or the member's rejoin would win and the blocker's join would fail.
    sessionTimeoutMs: 30_000,
    heartbeatIntervalMs: 5_000,
    rebalanceTimeoutMs: 30_000,
    handler: async (envelope, { tx, id }) => {
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: 'platformatic' });
    },
  });
  running.add(consumer);
  const crashes: { error: { message?: string }; restart: boolean }[] = [];
  consumer.on('consumer:crashed', (e) => {
    crashes.push(e as (typeof crashes)[number]);
    outOfGroup = true;
  });
  let joins = 0;
  consumer.on('group:joined', () => {
    joins += 1;
    outOfGroup = false;
  });
  await consumer.start();
  await waitFor(
    'the member to own all three partitions',
    () => consumer.health().assignment[topic]?.length === 3,
    60_000,
  );

  await produce(
    kafka,
    topic,
    before.map((id, i) => message(id, `k${i % 12}`)),
  );
  await waitForCommitted(admin, groupId, topic, 90_000);
  expect(crashes).toEqual([]);

  // The admin removes the member and the blocker joins the emptied group before the member hears
  // of it (its next heartbeat); should the member's rejoin win that race, the blocker is turned
  // away, and it all starts again.
  const blocker = await (async () => {
    for (let attempt = 1; attempt <= 5; attempt++) {
      const joinsBefore = joins;
      const b = await blockGroup(groupId, dummy, consumer.health().memberId);
      if (b) return b;
      await waitFor('the member to rejoin', () => joins > joinsBefore, 60_000);
    }
    throw new Error('the member rejoined before the blocker 5 times');
  })();

  // The library's rejoin failed (its error); then the supervisor's first rejoin fails too.
  await waitFor('two crash reports', () => crashes.length >= 2, 60_000);
  const joinsWhileOut = joins;
  await produce(
    kafka,
    topic,
    during.map((id, i) => message(id, `k${i % 12}`)),
  );
  // Another failed rejoin after the messages are on the topic: they had time to be fetched.
  const seen = crashes.length;
  await waitFor('another failed rejoin', () => crashes.length > seen, 60_000);
  expect(crashes.every((c) => c.restart)).toBe(true);
  // The library's text for INCONSISTENT_GROUP_PROTOCOL (the serialized error keeps no code of Kafka's).
  expect(crashes.some((c) => /supported protocols are incompatible/.test(c.error.message ?? ''))).toBe(true);
  const out = consumer.health();
  expect(out.state).toBe('running');
  expect(out.assignment).toEqual({});
  expect(joins).toBe(joinsWhileOut);
  // Out of the group, the member fetched nothing and handled nothing of what came meanwhile.
  expect(batchesWhileOut).toEqual([]);
  const duringIds = new Set(during);
  expect((await ledger.effects()).filter((e) => duringIds.has(e.messageId))).toEqual([]);

  // The blocker leaves: the supervisor's next rejoin succeeds and the member gets the topic back.
  await blocker.disconnect();
  blockers.delete(blocker);
  await waitFor(
    'the member to own all three partitions again',
    () => consumer.health().assignment[topic]?.length === 3,
    90_000,
  );
  expect(joins).toBeGreaterThan(joinsWhileOut);
  await waitForCommitted(admin, groupId, topic, 90_000);

  await consumer.stop();
  running.delete(consumer);
  expect(consumer.health().state).toBe('stopped');
  const verdict = await ledger.check({ expectedIds: [...before, ...during] });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated).toEqual([]);
  expect(verdict.unexpected).toEqual([]);
  expect(verdict.ok).toBe(true);
});
