import { ErrorCode, OnceError } from '@once/core';
import { describe, expect, it } from 'vitest';
import { isConfluentOwnershipLost, stripNul } from '../../src/client/confluent.js';
import type { GroupJoin, PartitionBatch } from '../../src/client/types.js';
import { type ConfluentConfig, type ConfluentKafkaLike, confluent } from '../../src/confluent.js';

// The Confluent client's own logic over a fake of the structural interface it calls (no addon, so
// this runs in every `npm test`): settings merged in the right order, assignments from the
// rebalance callback, stop() draining the running eachBatch calls, NUL stripping, error codes.
// The real library is exercised by packages/kafka/test/confluent (ONCE_KAFKA_CLIENT=confluent).

/** The eachBatch payload the library hands out, as far as the client reads it. */
interface Payload {
  batch: {
    topic: string;
    partition: number;
    messages: { offset: string; key: Buffer | null; value: Buffer | null; timestamp: string }[];
    lastOffset(): string;
  };
  isRunning(): boolean;
  isStale(): boolean;
  resolveOffset(offset: string): void;
}

class FakeConsumer {
  readonly calls: string[] = [];
  eachBatch?: (p: Payload) => Promise<void>;
  constructor(readonly config: ConfluentConfig) {}
  async connect() {
    this.calls.push('connect');
  }
  async subscribe(s: { topics: string[] }) {
    this.calls.push(`subscribe ${s.topics.join(',')}`);
  }
  async run(c: { eachBatch: (p: Payload) => Promise<void>; eachBatchAutoResolve: boolean }) {
    this.calls.push(`run autoResolve=${c.eachBatchAutoResolve}`);
    this.eachBatch = c.eachBatch;
  }
  pause(tps: { topic: string; partitions?: number[] }[]) {
    this.calls.push(`pause ${JSON.stringify(tps)}`);
  }
  resume(tps: { topic: string; partitions?: number[] }[]) {
    this.calls.push(`resume ${JSON.stringify(tps)}`);
  }
  seek(t: { topic: string; partition: number; offset: string }) {
    this.calls.push(`seek ${t.topic}/${t.partition}@${t.offset}`);
  }
  async commitOffsets(t: { topic: string; partition: number; offset: string; metadata: string | null }[]) {
    this.calls.push(`commit ${JSON.stringify(t)}`);
  }
  async disconnect() {
    this.calls.push('disconnect');
  }
  /** What the library does on a rebalance: calls the user's rebalance_cb. */
  rebalance(code: number, assignment: { topic: string; partition: number }[]) {
    (this.config.rebalance_cb as (e: { code: number }, a: typeof assignment) => unknown)(
      { code },
      assignment,
    );
  }
}

function fakeKafka() {
  const consumers: FakeConsumer[] = [];
  const producers: ConfluentConfig[] = [];
  const kafka: ConfluentKafkaLike = {
    consumer: (config) => {
      const c = new FakeConsumer(config);
      consumers.push(c);
      return c;
    },
    producer: (config) => {
      producers.push(config);
      return {};
    },
    admin: () => ({}),
  };
  return { kafka, consumers, producers };
}

const config = {
  groupId: 'g',
  sessionTimeoutMs: 30_000,
  heartbeatIntervalMs: 3_000,
  rebalanceTimeoutMs: 60_000,
};

function payload(topic: string, partition: number, offsets: string[]): Payload {
  return {
    batch: {
      topic,
      partition,
      messages: offsets.map((offset) => ({ offset, key: null, value: null, timestamp: '0' })),
      lastOffset: () => offsets[offsets.length - 1]!,
    },
    isRunning: () => true,
    isStale: () => false,
    resolveOffset: () => undefined,
  };
}

describe('confluent(kafka, defaults)', () => {
  it('refuses what is not a KafkaJS.Kafka instance, or bad defaults, with INVALID_OPTION', () => {
    const { kafka } = fakeKafka();
    for (const bad of [undefined, null, {}, { consumer() {}, producer() {} }, 'kafka']) {
      let err: unknown;
      try {
        confluent(bad as never);
      } catch (e) {
        err = e;
      }
      expect(OnceError.is(err) && err.code === ErrorCode.InvalidOption).toBe(true);
      expect(String((err as Error).message)).toMatch(/confluent\(kafka\): kafka must be/);
    }
    expect(() => confluent(kafka, 1 as never)).toThrow(/defaults must be an object/);
    expect(() => confluent(kafka, { consumer: [] as never })).toThrow(/defaults\.consumer must be an object/);
    expect(() => confluent(kafka, { consumer: { kafkaJS: 'x' as never } })).toThrow(
      /kafkaJS must be an object/,
    );
    expect(confluent(kafka).name).toBe('confluent');
  });

  it("merges defaults under consumerConfig under once's own settings, and drops classic-only ones for KIP-848", async () => {
    const { kafka, consumers } = fakeKafka();
    const client = confluent(kafka, {
      consumer: {
        'group.protocol': 'consumer',
        'js.consumer.max.batch.size': 8,
        kafkaJS: { groupId: 'no', maxBytes: 1 },
      },
    });
    const c = client.consumer({
      ...config,
      extra: { 'js.consumer.max.batch.size': 16, kafkaJS: { autoCommit: true, maxBytes: 2 } },
    });
    await c.connect();
    expect(consumers).toHaveLength(0); // made at subscribe: fromBeginning is a consumer setting
    await c.subscribe(['t'], true);
    const made = consumers[0]!.config;
    expect(made['group.protocol']).toBe('consumer');
    expect(made['js.consumer.max.batch.size']).toBe(16);
    expect(made.kafkaJS).toEqual({
      groupId: 'g',
      maxBytes: 2,
      fromBeginning: true,
      autoCommit: false,
      rebalanceTimeout: 60_000,
    });
    const classic = confluent(kafka).consumer({ ...config, extra: {} });
    await classic.connect();
    await classic.subscribe(['t'], false);
    expect(consumers[1]!.config.kafkaJS).toMatchObject({
      fromBeginning: false,
      sessionTimeout: 30_000,
      heartbeatInterval: 3_000,
    });
  });

  it('reports the full assignment after each rebalance, eager and incremental, and a revoked batch is stale', async () => {
    const { kafka, consumers } = fakeKafka();
    const c = confluent(kafka).consumer({ ...config, extra: {} });
    const joins: GroupJoin['assignment'][] = [];
    c.onGroupJoin((e) => joins.push(e.assignment));
    await c.connect();
    await c.subscribe(['t'], true);
    let seen: PartitionBatch | undefined;
    let release!: () => void;
    await c.run({
      concurrency: 2,
      eachBatch: async (b) => {
        seen = b;
        await new Promise<void>((r) => {
          release = r;
        });
      },
    });
    const f = consumers[0]!;
    const tp = (partition: number) => ({ topic: 't', partition });
    f.rebalance(-175, [tp(0), tp(1), tp(2)]);
    const running = f.eachBatch!(payload('t', 1, ['5', '6']));
    await Promise.resolve();
    expect(seen!.isStale()).toBe(false);
    await expect(seen!.heartbeat()).resolves.toBeUndefined();
    f.rebalance(-174, [tp(1)]); // KIP-848: only what moves
    expect(seen!.isStale()).toBe(true);
    await expect(seen!.heartbeat()).rejects.toSatisfy(isConfluentOwnershipLost);
    f.rebalance(-175, [tp(3)]);
    expect(joins).toEqual([{ t: [0, 1, 2] }, { t: [0, 2] }, { t: [0, 2, 3] }]);
    await seen!.commit('7', 'm');
    expect(f.calls).toContain(
      `commit ${JSON.stringify([{ topic: 't', partition: 1, offset: '7', metadata: 'm' }])}`,
    );
    release();
    await running;
  });

  it('stop() hands out no new batch, pauses the owned partitions and waits for the running eachBatch calls', async () => {
    const { kafka, consumers } = fakeKafka();
    const c = confluent(kafka).consumer({ ...config, extra: {} });
    await c.connect();
    await c.subscribe(['t'], true);
    let calls = 0;
    let release!: () => void;
    await c.run({
      concurrency: 2,
      eachBatch: async () => {
        calls += 1;
        await new Promise<void>((r) => {
          release = r;
        });
      },
    });
    const f = consumers[0]!;
    f.rebalance(-175, [
      { topic: 't', partition: 0 },
      { topic: 't', partition: 1 },
    ]);
    const running = f.eachBatch!(payload('t', 0, ['1']));
    await Promise.resolve();
    let stopped = false;
    const stopping = c.stop().then(() => {
      stopped = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(stopped).toBe(false);
    expect(f.calls).toContain(`pause ${JSON.stringify([{ topic: 't', partitions: [0, 1] }])}`);
    await f.eachBatch!(payload('t', 1, ['9'])); // arrives during stop: not handed out
    expect(calls).toBe(1);
    release();
    await running;
    await stopping;
    expect(stopped).toBe(true);
    await c.disconnect();
    expect(f.calls.at(-1)).toBe('disconnect');
  });

  it('the producer is idempotent, acks all, one in flight, murmur2_random, whatever the settings say', () => {
    const { kafka, producers } = fakeKafka();
    confluent(kafka).producer({
      kafkaJS: { idempotent: false, acks: 1, maxInFlightRequests: 5, clientId: 'x' },
    });
    expect(producers[0]).toEqual({
      partitioner: 'murmur2_random',
      kafkaJS: { clientId: 'x', idempotent: true, acks: -1, maxInFlightRequests: 1 },
    });
  });
});

describe('stripNul and isConfluentOwnershipLost', () => {
  it('strips only trailing NULs', () => {
    expect(stripNul('once:1:{"end":"4"}\u0000')).toBe('once:1:{"end":"4"}');
    expect(stripNul('a\u0000b\u0000\u0000')).toBe('a\u0000b');
    expect(stripNul('\u0000')).toBe('');
    expect(stripNul(null)).toBeNull();
    expect(stripNul(undefined)).toBeNull();
  });

  it('knows the generation-over codes of both protocols and nothing else', () => {
    for (const code of [16, 22, 25, 27, 82, 110, 113, -142])
      expect(isConfluentOwnershipLost({ code })).toBe(true);
    for (const v of [
      { code: 0 },
      { code: -185 },
      { code: '22' },
      { type: 'ILLEGAL_GENERATION' },
      null,
      'x',
    ]) {
      expect(isConfluentOwnershipLost(v)).toBe(false);
    }
  });
});
