import type { Admin } from 'kafkajs';
import { sleep } from './wait.js';

// A Kafka broker that has just started answers some requests with errors that only say "not
// yet": its group coordinator loads __consumer_offsets ("The coordinator is loading and hence
// can't process requests for this group"), and a topic it has just created is in the controller's
// metadata before the broker hosts its partitions ("This server does not host this
// topic-partition", from the leader wait of createTopics or from any metadata refresh of an admin
// that has touched that topic). Both show on freshly started brokers (Kafka 3.9.2 here; 4.1 and
// 4.4 too), the second also under load on an old one. kafkajs gives up on them at once:
// createTopics bails on anything but NOT_CONTROLLER, and fetchOffsets has no retry at all. These
// helpers wait them out, and only them, for a bounded time.

/** What a fresh topic's metadata answers until the broker hosts its partitions (kafkajs's types). */
const TOPIC_NOT_READY: ReadonlySet<string> = new Set([
  'UNKNOWN_TOPIC_OR_PARTITION',
  'LEADER_NOT_AVAILABLE',
  'NOT_LEADER_FOR_PARTITION',
]);
/** What a group coordinator answers while it loads or moves; fetchOffsets also reads topic metadata. */
const GROUP_NOT_READY: ReadonlySet<string> = new Set([
  'GROUP_LOAD_IN_PROGRESS',
  'GROUP_COORDINATOR_NOT_AVAILABLE',
  'NOT_COORDINATOR_FOR_GROUP',
  ...TOPIC_NOT_READY,
]);

/** How long the helpers wait out "not yet" answers. */
export interface KafkaSetupOptions {
  /** Give up (throwing the last error) after this many ms. @default 60000 */
  readonly timeoutMs?: number;
  /** Pause between tries, in ms. @default 200 */
  readonly pauseMs?: number;
}

/**
 * The kafkajs protocol error types in `err`: its own, its cause's (kafkajs wraps errors after its
 * retries), an aggregate's. Empty when any part of it is not a protocol error, so that only an
 * error made entirely of "not yet" answers is waited out.
 */
export function kafkaErrorTypes(err: unknown): string[] {
  const types: string[] = [];
  const visit = (e: unknown, depth: number): boolean => {
    if (depth > 5 || typeof e !== 'object' || e === null) return false;
    const { type, cause, errors } = e as { type?: unknown; cause?: unknown; errors?: unknown };
    if (Array.isArray(errors) && errors.length > 0) return errors.every((x) => visit(x, depth + 1));
    if (typeof type === 'string') {
      types.push(type);
      return true;
    }
    return cause !== undefined && cause !== e && visit(cause, depth + 1);
  };
  return visit(err, 0) ? types : [];
}

/** Runs `attempt` until it resolves; only errors whose every type is in `waitOut` are tried again. */
async function untilReady<T>(
  what: string,
  waitOut: ReadonlySet<string>,
  attempt: () => Promise<T>,
  options: KafkaSetupOptions,
): Promise<T> {
  const until = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      const types = kafkaErrorTypes(err);
      const notYet = types.length > 0 && types.every((t) => waitOut.has(t));
      if (!notYet) throw err;
      if (Date.now() >= until) {
        const answered = types.join(', ');
        throw new Error(
          `${what}: the broker still answered ${answered} after ${options.timeoutMs ?? 60_000} ms`,
          {
            cause: err,
          },
        );
      }
      await sleep(options.pauseMs ?? 200);
    }
  }
}

/** A topic to create with topic configs (`retention.ms`, ...) as well as its partition count. */
export interface KafkaTopicSpec {
  /** How many partitions the topic has. */
  readonly numPartitions: number;
  /** Topic configs set at creation. @default none */
  readonly configEntries?: readonly { readonly name: string; readonly value: string }[];
}

/**
 * Creates the topics (name → partition count, or a {@link KafkaTopicSpec}) and returns once every
 * partition of each has a leader. kafkajs's own leader wait is not used: it fails on the first
 * "not yet", and it is skipped when the topics exist already, as they do when a creation is tried
 * again. Creating again is harmless (kafkajs resolves `false` when every topic exists); the
 * leaders are then read from the metadata until each partition has one.
 *
 * Resolves to kafkajs's answer for the creation that went through: `true` when none of the topics
 * existed already. A "not yet" that is tried again comes from the metadata refresh before the
 * request or is the refusal of a topic's creation, so the creation of a single topic tried again
 * still answers `true`; with several topics, one created beside another refused makes it `false`.
 */
export async function createTopicsReady(
  admin: Admin,
  topics: Readonly<Record<string, number | KafkaTopicSpec>>,
  options: KafkaSetupOptions = {},
): Promise<boolean> {
  const specs = Object.entries(topics).map(([topic, spec]) =>
    typeof spec === 'number'
      ? { topic, numPartitions: spec }
      : {
          topic,
          numPartitions: spec.numPartitions,
          ...(spec.configEntries ? { configEntries: spec.configEntries.map((e) => ({ ...e })) } : {}),
        },
  );
  const names = specs.map((t) => t.topic);
  const what = `creating ${names.join(', ')}`;
  const created = await untilReady(
    what,
    TOPIC_NOT_READY,
    () => admin.createTopics({ waitForLeaders: false, topics: specs }),
    options,
  );
  await untilReady(
    what,
    TOPIC_NOT_READY,
    async () => {
      const { topics: meta } = await admin.fetchTopicMetadata({ topics: names });
      for (const { topic: name, numPartitions } of specs) {
        const partitions = meta.find((t) => t.name === name)?.partitions ?? [];
        const led = partitions.filter((p) => p.partitionErrorCode === 0 && p.leader >= 0);
        if (partitions.length !== numPartitions || led.length !== partitions.length) {
          // Worded as the broker words it, so that the wait goes on.
          const err = new Error(`${name}: ${led.length} of ${numPartitions} partitions have a leader`);
          throw Object.assign(err, { type: 'LEADER_NOT_AVAILABLE' });
        }
      }
    },
    options,
  );
  return created;
}

/** `admin.fetchOffsets`, waiting out a group coordinator that loads or moves and topic metadata not yet there. */
export async function fetchOffsetsReady(
  admin: Admin,
  request: { readonly groupId: string; readonly topics: string[] },
  options: KafkaSetupOptions = {},
): ReturnType<Admin['fetchOffsets']> {
  return untilReady(
    `fetching the offsets of group ${request.groupId}`,
    GROUP_NOT_READY,
    () => admin.fetchOffsets({ groupId: request.groupId, topics: request.topics }),
    options,
  );
}

/**
 * `admin.fetchTopicOffsets`, waiting out topic metadata that is not there yet. An admin refreshes
 * the metadata of every topic it has touched, so a topic another test has just created can make
 * this fail for a topic that is long ready.
 */
export async function fetchTopicOffsetsReady(
  admin: Admin,
  topic: string,
  options: KafkaSetupOptions = {},
): ReturnType<Admin['fetchTopicOffsets']> {
  return untilReady(
    `fetching the end offsets of ${topic}`,
    TOPIC_NOT_READY,
    async () => {
      try {
        return await admin.fetchTopicOffsets(topic);
      } catch (err) {
        // kafkajs 2.2.4 looks the partitions' leaders up in its metadata once for the end offsets
        // and once for the start offsets; when its metadata has none for the topic at that moment
        // (seen while other topics were being created on the same admin), it fails with a
        // TypeError of its own ("Cannot destructure property 'partitions' of 'low.pop(...)'")
        // instead of a broker error. It is the same "not yet".
        if (err instanceof TypeError && /\b(?:high|low)\.pop\(/.test(err.message)) {
          throw Object.assign(new Error(`${topic}: kafkajs found no partition leaders (${err.message})`), {
            type: 'LEADER_NOT_AVAILABLE',
            cause: err,
          });
        }
        throw err;
      }
    },
    options,
  );
}

/**
 * Makes a broker that has just started ready for groups: finding a coordinator makes it create
 * __consumer_offsets, and an offset fetch that succeeds means the coordinator has loaded it. On
 * a broker that has run for a while this costs two round trips.
 */
export async function warmUpKafka(
  brokers: readonly string[],
  options: KafkaSetupOptions = {},
): Promise<void> {
  const { Kafka, logLevel } = await import('kafkajs');
  const admin = new Kafka({
    clientId: 'once-harness',
    brokers: [...brokers],
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    await untilReady(
      'warming up the group coordinator',
      GROUP_NOT_READY,
      () => admin.describeGroups(['once-harness-warm-up']),
      options,
    );
    await fetchOffsetsReady(admin, { groupId: 'once-harness-warm-up', topics: [] }, options);
  } finally {
    await admin.disconnect();
  }
}
