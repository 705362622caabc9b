import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createTopicsReady,
  fetchOffsetsReady,
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
import { kafkaGroupProtocol, testBrokers } from '../../../../test/support/kafka-client.mjs';
import { confluent } from '../../src/confluent.js';
import { createKafkaConsumer, type KafkaConsumer, type KafkaConsumerOptions } from '../../src/index.js';

// The traps of @confluentinc/kafka-javascript 1.10.1 (librdkafka under a KafkaJS-compatible API)
// that once's consumer must survive, against the real broker and PostgreSQL (issue #30): slices of
// at most 32 per eachBatch, bug #517 (pause inside eachBatch losing prefetched messages) on
// once's own retry path, a handler longer than max.poll.interval.ms (its heartbeat() is a no-op),
// stop() (not implemented by the library) with a batch in flight, and a KIP-848 rebalance storm.
// Producing, reading back and admin calls stay on kafkajs (test/support), as in every suite.
// Run with ONCE_KAFKA_CLIENT=confluent after scripts/confluent-install (project kafka-confluent).

interface ConfluentLib {
  KafkaJS: {
    Kafka: new (config: Record<string, unknown>) => Parameters<typeof confluent>[0];
    logLevel: { NOTHING: number };
  };
}

/** Through a variable, so that a clone without the addon still type-checks (the types come with it). */
const CONFLUENT: string = '@confluentinc/kafka-javascript';
let lib: ConfluentLib;
let db: TestDb;
let kafka: Kafka;
let admin: Admin;
let ledger: Ledger;
const consumers: KafkaConsumer[] = [];

beforeAll(async () => {
  lib = (await import(CONFLUENT)) as ConfluentLib;
  db = await freshDb('kafka_confluent', 12);
  kafka = kafkaClient('once-confluent-traps');
  admin = kafka.admin();
  await admin.connect();
});
beforeEach(async () => {
  ledger = await db.ledger('once');
});
afterAll(async () => {
  for (const c of consumers) await c.stop().catch(() => undefined);
  await admin?.disconnect();
  await db?.close();
});

/**
 * A once client on Confluent; `consumer`: its consumer defaults (librdkafka properties), the run's
 * group protocol (ONCE_KAFKA_GROUP_PROTOCOL) unless they name one.
 */
function client(
  name: string,
  consumer: Record<string, unknown> = { 'group.protocol': kafkaGroupProtocol() },
) {
  return confluent(
    new lib.KafkaJS.Kafka({
      log_level: 3,
      kafkaJS: { clientId: name, brokers: testBrokers(), logLevel: lib.KafkaJS.logLevel.NOTHING },
    }),
    { consumer },
  );
}

type Options = KafkaConsumerOptions<unknown>;

/** A consumer on Confluent writing one ledger effect per run and counting runs per id. */
async function consumerOf(
  topic: string,
  groupId: string,
  runs: Map<string, number>,
  extra: Partial<Options> & { defaults?: Record<string, unknown> },
  before?: (id: string, run: number) => Promise<void>,
): Promise<KafkaConsumer> {
  const { defaults, ...rest } = extra;
  const c = createKafkaConsumer({
    kafka: client(uniqueName('c'), defaults),
    groupId,
    topics: [topic],
    pool: db.pool,
    schema: db.schema,
    fromBeginning: true,
    deadLetterTopic: false,
    logger: false,
    handler: async (envelope, { tx, id }) => {
      const k = (runs.get(id) ?? 0) + 1;
      runs.set(id, k);
      await before?.(id, k);
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: String(k) });
    },
    ...rest,
  } as Options);
  consumers.push(c);
  return c;
}

/** Produces `n` messages over `keys` keys (so over the partitions); returns their ids. */
async function produceIds(topic: string, n: number, keys = 8, from = 0): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, k) => `${topic}-${from + k}`);
  await produce(
    kafka,
    topic,
    ids.map((id, k) => message(id, `key-${k % keys}`)),
  );
  return ids;
}

async function committed(groupId: string, topic: string): Promise<Map<number, string>> {
  const [t] = await fetchOffsetsReady(admin, { groupId, topics: [topic] });
  return new Map((t?.partitions ?? []).map((p) => [p.partition, p.offset]));
}

async function expectOnce(ids: string[]) {
  const verdict = await ledger.check({ expectedIds: ids, checkOrderPerKey: true });
  expect(verdict).toMatchObject({ lost: [], duplicated: [], unexpected: [], orderViolations: [] });
  expect(verdict.total).toBe(ids.length);
}

describe('@confluentinc/kafka-javascript traps', () => {
  it("eachBatch slices of at most 32 (js.consumer.max.batch.size) with batchSize 100: every message once, once's transactions hold at most 32", {
    timeout: 120_000,
  }, async () => {
    const topic = uniqueName('cf-slices');
    await createTopicsReady(admin, { [topic]: 1 });
    const ids = await produceIds(topic, 250, 1);
    const runs = new Map<string, number>();
    const groupId = uniqueName('g-cf-slices');
    const c = await consumerOf(topic, groupId, runs, { batchSize: 100 });
    const slices: number[] = [];
    c.on('slice:done', (e) => slices.push(e.messages));
    await c.start();
    await waitForCommitted(admin, groupId, topic);
    await c.stop();
    // Once's batch is the library's slice: 100 is never reached, 32 is the most one transaction holds.
    expect(Math.max(...slices)).toBeLessThanOrEqual(32);
    expect(slices.reduce((a, b) => a + b, 0)).toBe(250);
    expect([...runs.values()].every((k) => k === 1)).toBe(true);
    expect(runs.size).toBe(250);
    await expectOnce(ids);
    expect((await committed(groupId, topic)).get(0)).toBe('250');
  });

  it('bug #517 on 4 partitions: transient failures mid-batch (pause and seek), then every message once and all partitions go on', {
    timeout: 180_000,
  }, async () => {
    const topic = uniqueName('cf-517');
    await createTopicsReady(admin, { [topic]: 4 });
    const first = await produceIds(topic, 400, 16);
    // Fail once, mid-slice, on messages spread over the keys (so over the partitions); the retry
    // delay is above inlineRetryMaxMs, so once pauses the partition and seeks back.
    const failing = new Set(first.filter((_, k) => k % 37 === 5));
    const runs = new Map<string, number>();
    const groupId = uniqueName('g-cf-517');
    const c = await consumerOf(
      topic,
      groupId,
      runs,
      { batch: false, batchSize: 100, retryDelayMs: () => 1_200, inlineRetryMaxMs: 100, concurrency: 4 },
      async (id, run) => {
        if (failing.has(id) && run === 1) throw new Error(`transient ${id}`);
      },
    );
    let pauses = 0;
    c.on('partition:retry', () => pauses++);
    await c.start();
    await waitForCommitted(admin, groupId, topic);
    expect(pauses).toBe(failing.size);
    // Consumption continues on every partition after the pauses: a second wave is read too.
    const second = await produceIds(topic, 200, 16, 400);
    await waitForCommitted(admin, groupId, topic);
    await c.stop();
    for (const id of [...first, ...second]) {
      expect({ id, runs: runs.get(id) }).toEqual({ id, runs: failing.has(id) ? 2 : 1 });
    }
    await expectOnce([...first, ...second]);
    const offsets = await committed(groupId, topic);
    const total = [...offsets.values()].reduce((a, b) => a + Number(b), 0);
    expect(total).toBe(600);
    expect(offsets.size).toBe(4);
    for (const o of offsets.values()) expect(Number(o)).toBeGreaterThan(0);
  });

  it('a handler longer than max.poll.interval.ms (heartbeat() is a no-op): effects once, nothing lost, consumption goes on', {
    timeout: 180_000,
  }, async () => {
    const topic = uniqueName('cf-poll');
    await createTopicsReady(admin, { [topic]: 2 });
    const ids = await produceIds(topic, 60, 4);
    const slow = ids[7]!;
    const runs = new Map<string, number>();
    const groupId = uniqueName('g-cf-poll');
    // rebalanceTimeoutMs is the library's max.poll.interval.ms (6 s; it polls librdkafka with
    // twice that): the handler sleeps past both.
    const c = await consumerOf(
      topic,
      groupId,
      runs,
      {
        batch: false,
        batchSize: 20,
        rebalanceTimeoutMs: 6_000,
        sessionTimeoutMs: 6_000,
        heartbeatIntervalMs: 1_000,
      },
      async (id, run) => {
        if (id === slow && run === 1) await sleep(16_000);
      },
    );
    const joins: number[][] = [];
    c.on('group:joined', (e) => joins.push(e.assignment[topic] ?? []));
    await c.start();
    await waitForCommitted(admin, groupId, topic, 150_000);
    // The trap did spring: the member overran the poll interval, lost its partitions and rejoined.
    console.log(`[confluent max.poll] assignments seen: ${JSON.stringify(joins)}`);
    expect(joins.some((a) => a.length === 0)).toBe(true);
    const more = await produceIds(topic, 20, 4, 60);
    await waitForCommitted(admin, groupId, topic, 60_000);
    await c.stop();
    const all = [...ids, ...more];
    for (const id of all) expect(runs.get(id) ?? 0).toBeGreaterThanOrEqual(1);
    await expectOnce(all);
  });

  it("stop() with a batch in flight (the library's stop() is not implemented): no commit after stop, nothing lost", {
    timeout: 120_000,
  }, async () => {
    const topic = uniqueName('cf-stop');
    await createTopicsReady(admin, { [topic]: 1 });
    const ids = await produceIds(topic, 100, 1);
    const runs = new Map<string, number>();
    const groupId = uniqueName('g-cf-stop');
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let inFlight!: () => void;
    const reached = new Promise<void>((r) => {
      inFlight = r;
    });
    const c = await consumerOf(topic, groupId, runs, { batch: false, batchSize: 10 }, async (id) => {
      if (id === ids[45]) {
        inFlight();
        await gate;
      }
    });
    await c.start();
    await reached;
    const stopping = c.stop();
    await sleep(300);
    release();
    await stopping;
    const atStop = await committed(groupId, topic);
    await sleep(3_000);
    expect(await committed(groupId, topic)).toEqual(atStop);
    const at = Number(atStop.get(0) ?? '0');
    expect(at).toBeLessThanOrEqual(100);
    // The rest is read by the next member of the group: every message once.
    const again = await consumerOf(topic, groupId, runs, { batch: false, batchSize: 10 });
    await again.start();
    await waitForCommitted(admin, groupId, topic);
    await again.stop();
    for (const id of ids) expect(runs.get(id) ?? 0).toBeGreaterThanOrEqual(1);
    await expectOnce(ids);
  });

  describe.each(['consumer', 'classic'])('rebalance storm, group.protocol %s', (protocol) => {
    it('members join and leave while consuming: effects once, offsets reach the end', {
      timeout: 240_000,
    }, async () => {
      const topic = uniqueName(`cf-storm-${protocol}`);
      await createTopicsReady(admin, { [topic]: 4 });
      const groupId = uniqueName(`g-cf-storm-${protocol}`);
      const runs = new Map<string, number>();
      const defaults = { 'group.protocol': protocol };
      const member = () =>
        consumerOf(topic, groupId, runs, { batch: true, batchSize: 20, defaults }, async () => sleep(5));
      const a = await member();
      await a.start();
      const ids: string[] = [];
      ids.push(...(await produceIds(topic, 300, 16)));
      // Members come and go while the first keeps consuming and messages keep arriving.
      for (let round = 0; round < 3; round++) {
        const b = await member();
        await b.start();
        ids.push(...(await produceIds(topic, 150, 16, ids.length)));
        await sleep(2_500);
        const d = await member();
        await d.start();
        await sleep(1_500);
        await b.stop();
        ids.push(...(await produceIds(topic, 150, 16, ids.length)));
        await sleep(1_000);
        await d.stop();
      }
      await waitForCommitted(admin, groupId, topic, 120_000);
      await waitFor('every id run', async () => ids.every((id) => runs.has(id)), 30_000);
      await a.stop();
      await expectOnce(ids);
      const offsets = await committed(groupId, topic);
      expect([...offsets.values()].reduce((s, o) => s + Number(o), 0)).toBe(ids.length);
    });
  });

  it('confluent(kafka) refuses a wrong argument, naming it', () => {
    expect(() => confluent({} as never)).toThrow(/kafka must be a KafkaJS\.Kafka instance/);
    const k = new lib.KafkaJS.Kafka({ kafkaJS: { brokers: testBrokers() } });
    expect(() => confluent(k, { consumer: 'x' } as never)).toThrow(/defaults\.consumer must be an object/);
    expect(() => confluent(k, null as never)).toThrow(/defaults must be an object/);
  });
});
