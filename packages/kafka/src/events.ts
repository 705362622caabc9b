import type { SerializedError } from '@once/core';
import type { ConsumerEventMap } from '@once/core/adapter';

/** What every partition event of the Kafka consumer carries. */
export interface PartitionEventBase {
  /** The topic the partition belongs to. */
  topic: string;
  /** The partition number within the topic. */
  partition: number;
}

/**
 * Every event the Kafka consumer emits, keyed by name: the events every once consumer emits
 * (`consumer:*`, `message:dead-lettered`, `message:killed-consumer`, `error`) plus Kafka's own.
 * Per-message events (`message:processed`, ...) come from the inbox: `consumer.inbox.on(...)`.
 */
export interface KafkaConsumerEventMap extends ConsumerEventMap {
  /** A slice's transaction committed and its offsets were resolved (and committed to Kafka unless noted). */
  'slice:done': PartitionEventBase & {
    /** The offset of the slice's first message, as a decimal string. */
    firstOffset: string;
    /**
     * The offset of the slice's last settled message, as a decimal string; the committed offset is the next
     * one.
     */
    lastOffset: string;
    /** How many messages the slice settled (at least 1). */
    messages: number;
    /** Time from the slice's start to its settle, in milliseconds. */
    durationMs: number;
  };
  /** A partition was paused and will be read again from `offset` after `delayMs`. */
  'partition:retry': PartitionEventBase & {
    /** The offset the partition is read again from (the failed message's), as a decimal string. */
    offset: string;
    /** The attempt the failed message was on (1 for a first delivery). */
    attempt: number;
    /** How long the partition stays paused, in milliseconds. */
    delayMs: number;
    /** The error of the failed run. */
    error: SerializedError;
  };
  /**
   * A previous consumer died with these offsets in flight: they run one at a time, alone in the
   * process (no other partition runs meanwhile), each start counted in Postgres.
   */
  'partition:replay': PartitionEventBase & {
    /** The first offset left in flight, as a decimal string. */
    fromOffset: string;
    /**
     * The last offset left in flight, as a decimal string, from the replay marker the previous consumer
     * committed.
     */
    toOffset: string;
  };
  /** The client joined the group (or its assignment changed); `assignment` is what this member now owns. */
  'group:joined': {
    /** The group generation this join started (rebalances + 1). */
    generation: number;
    /** This member's id in the group, as the broker assigned it. */
    memberId: string;
    /** The partitions this member now owns, by topic. */
    assignment: Record<string, number[]>;
  };
  /** The client library's consumer crashed; `restart` says whether it restarts itself. */
  'consumer:crashed': {
    /** Why the client crashed. */
    error: SerializedError;
    /** True when the client restarts the consumer itself; false when the consumer stays down (unhealthy). */
    restart: boolean;
  };
  /** Something failed that was retried or worked around (a commit, a dead-letter send, a marker read). */
  error: {
    /** Where it happened, a short tag such as `commit`, `dead-letter` or the client's name. */
    where: string;
    /** What failed, serialized for logs. */
    error: SerializedError;
    /** The topic it concerns, when it concerns one. */
    topic?: string;
    /** The partition it concerns, when it concerns one. */
    partition?: number;
  };
}
/** The name of an event the Kafka consumer emits. */
export type KafkaConsumerEventName = keyof KafkaConsumerEventMap;
/** A listener of the Kafka consumer event `E`, called with its payload. */
export type KafkaConsumerEventListener<E extends KafkaConsumerEventName> = (
  event: KafkaConsumerEventMap[E],
) => void;

/** The events this consumer adds to the kit's, at run time: `on()` refuses any other name. */
export const KAFKA_CONSUMER_EVENT_NAMES = Object.freeze({
  'slice:done': true,
  'partition:retry': true,
  'partition:replay': true,
  'group:joined': true,
  'consumer:crashed': true,
} satisfies Record<Exclude<keyof KafkaConsumerEventMap, keyof ConsumerEventMap>, true>);
