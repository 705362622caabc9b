/**
 * The client seam: what `@once/kafka` needs of a Kafka client library, and nothing more.
 *
 * Design (issue #30 item 1). The adapter (offsets after the PostgreSQL COMMIT, the contiguous
 * settled prefix, rebalance safety, the replay marker, retry-in-place pause/seek, database holds,
 * dead letters, topic checks) is written once against {@link KafkaClient}; each client library
 * (kafkajs today; `@platformatic/kafka` and `@confluentinc/kafka-javascript` next) implements it
 * in its own module under `client/`, the only place that library is imported.
 *
 * - **Consuming is per-partition batches.** {@link GroupConsumer.run} calls `eachBatch` with one
 *   {@link PartitionBatch} of one partition at a time (up to `concurrency` partitions at once),
 *   autocommit off. A client with `eachBatch` (kafkajs, Confluent's KafkaJS API) maps it
 *   directly; one without (platformatic) builds it from per-partition fetch loops, with once's own
 *   batch limits. A client must not deliver the next batch of a partition before the previous
 *   `eachBatch` for it returned, and after `seek` it must deliver from the sought offset.
 * - **Commits are explicit.** The adapter calls {@link PartitionBatch.commit} with the next offset
 *   to read, only after the transaction covering the messages before it committed; the client
 *   sends exactly that (no autocommit, no commit of its own on rebalance or stop).
 * - **Ownership.** {@link GroupConsumer.onGroupJoin} gives the full new assignment after each join;
 *   a partition absent from it is revoked. `isStale()` on a batch says the partition was revoked
 *   or sought since the batch was fetched. {@link KafkaClient.isOwnershipLost} recognises the
 *   client's "generation over" errors: the adapter stops committing and throws the error back out
 *   of `eachBatch`, and the client rejoins. No commit for a partition follows the knowledge of its
 *   revocation. A commit that races a revocation is refused by the broker under the classic
 *   protocol (generation fencing) but not always under KIP-848: a probe on Kafka 4.2.2 and 4.4.0
 *   saw a member's commit for a partition it had just lost accepted
 *   (docs/history/kafka-clients-probe.md). So the adapter's own assignment view guards commits,
 *   and effects are once regardless because the claim is in PostgreSQL.
 * - **Pause/resume and seek per partition** (retry in place, the database hold). A client whose
 *   stream pauses only as a whole builds them (per-partition fetch loops).
 * - **Producing and admin** are small: an idempotent producer with `acks: all` and one request in
 *   flight (dead letters, `createKafkaPublisher`), topic existence and retention, the group's
 *   committed offset metadata.
 *
 * **Capabilities are data** ({@link KafkaClientCapabilities}). `commitMetadata`: offset commits carry
 * metadata and the admin reads it back; the replay marker (`replay-marker.ts`) lives there. A
 * client without it (platformatic commits `committedMetadata: null`; Confluent's `commitOffsets`
 * in 1.10.1 sends metadata, contrary to its migration guide, but it reads back with a trailing NUL
 * byte, so a marker through it must strip that) commits `null`. The adapter then keeps the
 * marker in PostgreSQL (`Inbox.noteInflight`, the `inflight` table of schema version 11): before
 * every slice it commits its progress, then notes the slice's last offset, committed on its own;
 * on a new assignment it reads the row back (`Inbox.inflightEnd`) and replays [first fetched
 * offset .. end] alone only when end >= the first offset, so a fresh group or a clean handover
 * runs nothing alone. The cost is one offset commit per slice (as the marker costs with kafkajs)
 * and one small PostgreSQL write. If the row cannot be read, the first slice (`batchSize`
 * messages) of the assignment runs alone: the progress commit before every slice bounds what a
 * crash can leave in flight to one slice from the committed offset.
 *
 * How the next clients map (notes for their modules):
 * - `@platformatic/kafka`: no eachBatch and one stream that pauses as a whole, so `run` keeps one
 *   fetch loop per assigned partition (`fetch` against the partition's leader, once's batch limits),
 *   which gives per-partition pause/resume/seek directly; `commit` is its `commit({ offsets })`
 *   (topic, partition, offset, leaderEpoch; no metadata: `commitMetadata: false`);
 *   `onGroupJoin` from `consumer:group:join` (and rejoin), revocation is absence, `isStale` turns
 *   true on a rejoin that drops the partition or a seek; `heartbeat` resolves unless its heartbeat
 *   reported a lost generation. `groupProtocol: 'consumer'` (KIP-848) passes through `extra`.
 * - `@confluentinc/kafka-javascript` (KafkaJS-compatible API): eachBatch maps like kafkajs, but
 *   batches are slices of at most 32 (`js.consumer.max.batch.size`); its `commitOffsets` metadata
 *   comes back with a trailing NUL (strip it, or `commitMetadata: false`); `heartbeat()` is a no-op; `stop()` is unsupported, so the
 *   client's `stop` drains its own in-flight eachBatch calls; bug #517 (pause inside eachBatch
 *   loses prefetched messages) is covered by the adapter always seeking back to the first
 *   unsettled offset right after pausing, which the client must honour.
 */

/** Header values as Kafka carries them: bytes or text, possibly repeated. */
export type ClientHeaders = Record<string, Buffer | string | (Buffer | string)[] | undefined>;

/** A consumed message, as the adapter reads it. */
export interface ClientMessage {
  /** Offset as a decimal string. */
  offset: string;
  /** The Kafka key, raw. */
  key: Buffer | null;
  /** The payload, raw (null for a tombstone). */
  value: Buffer | null;
  /** Headers, raw. */
  headers?: ClientHeaders;
  /** Timestamp, epoch ms as a decimal string. */
  timestamp: string;
}

/** A message to produce. */
export interface OutgoingMessage {
  /** Partitioning key. */
  key: Buffer | string | null;
  /** The payload. */
  value: Buffer | string | null;
  /** Headers, written as given. */
  headers: ClientHeaders;
}

/** One batch of one partition, handed to `eachBatch`. */
export interface PartitionBatch {
  /** The topic the messages were fetched from. */
  readonly topic: string;
  /** The partition of `topic` the messages were fetched from. */
  readonly partition: number;
  /** In offset order; never empty when the adapter sees it (the client skips empty fetches or the adapter returns). */
  readonly messages: readonly ClientMessage[];
  /** The last offset of the fetch (the last message's, for a client without a high-water view). */
  lastOffset(): string;
  /** False once the consumer is stopping. */
  isRunning(): boolean;
  /** True once the partition was revoked or sought since this batch was fetched. */
  isStale(): boolean;
  /** Keeps the group membership alive (throttled by the client); rejects with an ownership-lost error when the generation is over. */
  heartbeat(): Promise<void>;
  /** Marks offsets up to `offset` done in the client's own position (no commit). */
  resolveOffset(offset: string): void;
  /** Commits `next` (the next offset to read) for this partition, with `metadata` when the client carries it. */
  commit(next: string, metadata: string | null): Promise<void>;
}

/** The group's view after a join: the full assignment of this member. */
export interface GroupJoin {
  /** This member's id in the group. */
  memberId: string;
  /** Partitions by topic; a partition not listed is not this member's. */
  assignment: Record<string, number[]>;
}

/** The client's consumer failed; `restart`: it rejoins by itself. */
export interface ClientCrash {
  /** What failed. */
  error: unknown;
  /** The client rejoins by itself. */
  restart: boolean;
}

/** What the adapter sets on a group consumer. */
export interface GroupConsumerConfig {
  /** The consumer group. */
  groupId: string;
  /** Session timeout, ms. */
  sessionTimeoutMs: number;
  /** Heartbeat interval, ms. */
  heartbeatIntervalMs: number;
  /** Rebalance timeout, ms (classic protocol). */
  rebalanceTimeoutMs: number;
  /** Client-specific settings passed through untouched (the `consumerConfig` option). */
  extra: Readonly<Record<string, unknown>>;
}

/** A group member, autocommit off. */
export interface GroupConsumer {
  /** Connects to the cluster. */
  connect(): Promise<void>;
  /** Subscribes to `topics`; a new group starts at the earliest offset when `fromBeginning`, else at the end. */
  subscribe(topics: readonly string[], fromBeginning: boolean): Promise<void>;
  /** Starts consuming; resolves once running (not when stopped). */
  run(options: {
    /** How many partitions' batches may run at once. */
    concurrency: number;
    /** Called with each fetched batch of one partition; the next batch of that partition waits for it. */
    eachBatch: (batch: PartitionBatch) => Promise<void>;
  }): Promise<void>;
  /** Assignment hook: called after every join with the full new assignment (revocation is absence). */
  onGroupJoin(listener: (e: GroupJoin) => void): void;
  /** Crash hook: the client's consumer failed (and whether it restarts). */
  onCrash(listener: (e: ClientCrash) => void): void;
  /** Stops fetching the partitions (every partition of `topic` without `partitions`). */
  pause(topic: string, partitions?: readonly number[]): void;
  /** Fetches the partitions again (every partition of `topic` without `partitions`). */
  resume(topic: string, partitions?: readonly number[]): void;
  /** The next batch of the partition starts at `offset`. May throw between runs (a rejoin). */
  seek(topic: string, partition: number, offset: string): void;
  /** Stops fetching and waits for the running `eachBatch` calls. */
  stop(): Promise<void>;
  /** Leaves the group and closes. */
  disconnect(): Promise<void>;
}

/** An idempotent producer: `acks: all`, one request in flight, per-partition order. */
export interface ClientProducer {
  /** Connects the producer. */
  connect(): Promise<void>;
  /** Resolves once Kafka acknowledged every message (acks: all). */
  send(
    topicMessages: {
      /** The topic to write `messages` to. */
      topic: string;
      /** The messages, written in this order per partition. */
      messages: OutgoingMessage[];
    }[],
    options?: {
      /** How long Kafka may take to acknowledge, in milliseconds (the client's default without it). */
      timeoutMs?: number;
    },
  ): Promise<void>;
  /** Closes the producer. */
  disconnect(): Promise<void>;
}

/** The admin calls start() and the replay marker need. */
export interface ClientAdmin {
  /** Connects the admin client. */
  connect(): Promise<void>;
  /** Names of the topics that exist. */
  listTopics(): Promise<string[]>;
  /**
   * `retention.ms` of each topic (negative: unlimited); a topic the broker did not describe is
   * absent. `undefined`: the client library cannot read topic configurations at all.
   */
  retentionMs(topics: readonly string[]): Promise<Map<string, number> | undefined>;
  /** The group's committed offset metadata of a topic, by partition (null when none). */
  committedMetadata(groupId: string, topic: string): Promise<Map<number, string | null>>;
  /** Closes the admin client. */
  disconnect(): Promise<void>;
}

/** What differs per client, as data. */
export interface KafkaClientCapabilities {
  /** Offset commits carry metadata and `committedMetadata` reads it back (the replay marker's home). */
  readonly commitMetadata: boolean;
}

/**
 * A kafkajs `Kafka` instance passed as it is (what the `kafka` option was before the seam): the
 * three factories once calls. Written structurally, so that `@once/kafka`'s types never name
 * kafkajs and compile where it is not installed; a kafkajs `Kafka` fits it.
 */
export interface KafkaLike {
  /** kafkajs' `Kafka.consumer`. */
  consumer(config: {
    /** The consumer group. */
    groupId: string;
  }): object;
  /** kafkajs' `Kafka.producer`. */
  producer(config?: object): object;
  /** kafkajs' `Kafka.admin`. */
  admin(config?: object): object;
}

/** Brand that tells a {@link KafkaClient} from a raw client library object. */
export const KAFKA_CLIENT: unique symbol = Symbol.for('once.kafka.client');

/**
 * A Kafka client library behind once's seam. Make one with a client's factory, e.g.
 * `kafkajs(new Kafka({ brokers }))` from `@once/kafka/kafkajs`.
 */
export interface KafkaClient {
  /** The brand ({@link isKafkaClient}). */
  readonly [KAFKA_CLIENT]: true;
  /** The client library, e.g. `kafkajs`. */
  readonly name: string;
  /** What this client can do, as data. */
  readonly capabilities: KafkaClientCapabilities;
  /** A group consumer, autocommit off. */
  consumer(config: GroupConsumerConfig): GroupConsumer;
  /** An idempotent producer; `settings`: client-specific producer settings (the publisher's `producerConfig`). */
  producer(settings?: Readonly<Record<string, unknown>>): ClientProducer;
  /** An admin client (topic checks, committed metadata). */
  admin(): ClientAdmin;
  /** True for an error meaning this member's generation is over: stop committing, let the client rejoin. */
  isOwnershipLost(err: unknown): boolean;
}

/** True for a value made by a client factory of this package. */
export function isKafkaClient(value: unknown): value is KafkaClient {
  return (
    typeof value === 'object' && value !== null && (value as Partial<KafkaClient>)[KAFKA_CLIENT] === true
  );
}
