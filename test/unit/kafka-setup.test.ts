import {
  type Admin,
  KafkaJSAggregateError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSProtocolError,
} from 'kafkajs';
import { describe, expect, it } from 'vitest';
import {
  createTopicsReady,
  fetchOffsetsReady,
  fetchTopicOffsetsReady,
  kafkaErrorTypes,
} from '../support/index.js';

// The retry policy of the Kafka setup helpers: which answers are waited out, for how long, and
// that everything else fails at once. The real thing (a freshly started broker) is what made
// them; this pins the policy with kafkajs's own error classes and an admin that answers on cue.

/** A kafkajs protocol error as kafkajs builds it from a broker's error code. */
function protocol(type: string, code: number): KafkaJSProtocolError {
  return new KafkaJSProtocolError({ type, code, retriable: true, message: type } as unknown as Error);
}
const loading = () => protocol('GROUP_LOAD_IN_PROGRESS', 14);
const notHosted = () => protocol('UNKNOWN_TOPIC_OR_PARTITION', 3);

/** An admin whose methods answer from a script, one entry per call (the last repeats). */
function scripted(script: {
  createTopics?: (() => unknown)[];
  fetchTopicMetadata?: (() => unknown)[];
  fetchOffsets?: (() => unknown)[];
  fetchTopicOffsets?: (() => unknown)[];
}) {
  const calls: Record<string, unknown[]> = {
    createTopics: [],
    fetchTopicMetadata: [],
    fetchOffsets: [],
    fetchTopicOffsets: [],
  };
  const answer = (name: keyof typeof script) => async (arg: unknown) => {
    calls[name]?.push(arg);
    const steps = script[name] ?? [];
    const step = steps[Math.min((calls[name]?.length ?? 1) - 1, steps.length - 1)];
    return step?.();
  };
  const admin = {
    createTopics: answer('createTopics'),
    fetchTopicMetadata: answer('fetchTopicMetadata'),
    fetchOffsets: answer('fetchOffsets'),
    fetchTopicOffsets: answer('fetchTopicOffsets'),
  } as unknown as Admin;
  return { admin, calls };
}
const fail = (err: unknown) => () => {
  throw err;
};
const fast = { pauseMs: 1, timeoutMs: 2_000 };

describe('kafkaErrorTypes', () => {
  it('reads the type through kafkajs wrappers and aggregates; anything else makes it empty', () => {
    expect(kafkaErrorTypes(loading())).toEqual(['GROUP_LOAD_IN_PROGRESS']);
    expect(
      kafkaErrorTypes(new KafkaJSNumberOfRetriesExceeded(loading(), { retryCount: 5, retryTime: 100 })),
    ).toEqual(['GROUP_LOAD_IN_PROGRESS']);
    expect(kafkaErrorTypes(new KafkaJSAggregateError('x', [notHosted(), loading()]))).toEqual([
      'UNKNOWN_TOPIC_OR_PARTITION',
      'GROUP_LOAD_IN_PROGRESS',
    ]);
    expect(
      kafkaErrorTypes(new KafkaJSAggregateError('x', [notHosted(), new Error('socket hang up')])),
    ).toEqual([]);
    expect(kafkaErrorTypes(new Error('Connection timeout'))).toEqual([]);
    expect(kafkaErrorTypes('x')).toEqual([]);
  });
});

describe('fetchOffsetsReady', () => {
  it('waits out a coordinator that loads or moves, then returns the offsets', async () => {
    const offsets = [{ topic: 't', partitions: [{ partition: 0, offset: '10', metadata: null }] }];
    const { admin, calls } = scripted({
      fetchOffsets: [
        fail(loading()),
        fail(protocol('NOT_COORDINATOR_FOR_GROUP', 16)),
        fail(notHosted()),
        () => offsets,
      ],
    });
    await expect(fetchOffsetsReady(admin, { groupId: 'g', topics: ['t'] }, fast)).resolves.toEqual(offsets);
    expect(calls.fetchOffsets).toHaveLength(4);
  });

  it('any other error fails at once', async () => {
    const denied = protocol('GROUP_AUTHORIZATION_FAILED', 30);
    const { admin, calls } = scripted({ fetchOffsets: [fail(denied)] });
    await expect(fetchOffsetsReady(admin, { groupId: 'g', topics: ['t'] }, fast)).rejects.toBe(denied);
    expect(calls.fetchOffsets).toHaveLength(1);
  });

  it('is bounded: a coordinator that never loads fails after timeoutMs, naming the answer', async () => {
    const { admin } = scripted({ fetchOffsets: [fail(loading())] });
    const err = await fetchOffsetsReady(
      admin,
      { groupId: 'g', topics: ['t'] },
      { pauseMs: 5, timeoutMs: 100 },
    ).catch((e: Error) => e);
    expect(String(err)).toMatch(/group g: the broker still answered GROUP_LOAD_IN_PROGRESS after 100 ms/);
    expect((err as Error).cause).toBeInstanceOf(KafkaJSProtocolError);
  });
});

describe('fetchTopicOffsetsReady', () => {
  it('waits out metadata not there yet (another topic of the same admin), nothing else', async () => {
    const ends = [{ partition: 0, offset: '3', high: '3', low: '0' }];
    const ready = scripted({ fetchTopicOffsets: [fail(notHosted()), fail(notHosted()), () => ends] });
    await expect(fetchTopicOffsetsReady(ready.admin, 't', fast)).resolves.toEqual(ends);
    expect(ready.calls.fetchTopicOffsets).toHaveLength(3);
    // kafkajs 2.2.4's own failure when its metadata has no leaders for the topic at that moment.
    const noLeaders = new TypeError(
      "Cannot destructure property 'partitions' of 'low.pop(...)' as it is undefined.",
    );
    const racing = scripted({ fetchTopicOffsets: [fail(noLeaders), () => ends] });
    await expect(fetchTopicOffsetsReady(racing.admin, 't', fast)).resolves.toEqual(ends);
    const bug = new TypeError("Cannot read properties of undefined (reading 'offset')");
    await expect(
      fetchTopicOffsetsReady(scripted({ fetchTopicOffsets: [fail(bug)] }).admin, 't', fast),
    ).rejects.toBe(bug);
    const gone = new Error('Connection error: read ECONNRESET');
    const broken = scripted({ fetchTopicOffsets: [fail(gone)] });
    await expect(fetchTopicOffsetsReady(broken.admin, 't', fast)).rejects.toBe(gone);
  });
});

describe('createTopicsReady', () => {
  const meta = (leaders: number[]) => () => ({
    topics: [
      {
        name: 't',
        partitions: leaders.map((leader, partitionId) => ({ partitionId, leader, partitionErrorCode: 0 })),
      },
    ],
  });

  it('creates without kafkajs leader wait, tries again on "not hosted", then waits for every leader', async () => {
    const { admin, calls } = scripted({
      createTopics: [fail(notHosted()), () => false],
      fetchTopicMetadata: [fail(notHosted()), meta([1, -1]), meta([1]), meta([1, 1])],
    });
    // kafkajs's answer for the creation that went through (false: every topic existed already).
    await expect(createTopicsReady(admin, { t: 2 }, fast)).resolves.toBe(false);
    expect(calls.createTopics).toEqual([
      { waitForLeaders: false, topics: [{ topic: 't', numPartitions: 2 }] },
      { waitForLeaders: false, topics: [{ topic: 't', numPartitions: 2 }] },
    ]);
    expect(calls.fetchTopicMetadata).toHaveLength(4);
  });

  it('passes topic configs on, and answers true for topics it made', async () => {
    const retention = [{ name: 'retention.ms', value: '-1' }];
    const { admin, calls } = scripted({ createTopics: [() => true], fetchTopicMetadata: [meta([1])] });
    await expect(
      createTopicsReady(admin, { t: { numPartitions: 1, configEntries: retention } }, fast),
    ).resolves.toBe(true);
    expect(calls.createTopics).toEqual([
      { waitForLeaders: false, topics: [{ topic: 't', numPartitions: 1, configEntries: retention }] },
    ]);
  });

  it('a refusal of the creation itself fails at once', async () => {
    const invalid = protocol('INVALID_PARTITIONS', 37);
    const { admin, calls } = scripted({ createTopics: [fail(invalid)] });
    await expect(createTopicsReady(admin, { t: 0 }, fast)).rejects.toBe(invalid);
    expect(calls.createTopics).toHaveLength(1);
    expect(calls.fetchTopicMetadata).toHaveLength(0);
  });

  it('is bounded: partitions that never get a leader fail after timeoutMs', async () => {
    const { admin } = scripted({ createTopics: [() => true], fetchTopicMetadata: [meta([-1, -1])] });
    await expect(createTopicsReady(admin, { t: 2 }, { pauseMs: 5, timeoutMs: 100 })).rejects.toThrow(
      /creating t: the broker still answered LEADER_NOT_AVAILABLE after 100 ms/,
    );
  });
});
