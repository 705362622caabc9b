import type { SerializedError } from '@once/core';
import type { ConsumerEventMap } from '@once/core/adapter';

/** What every partition event of the Kafka consumer carries. */
export interface PartitionEventBase {
  topic: string;
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
    firstOffset: string;
    lastOffset: string;
    messages: number;
    durationMs: number;
  };
  /** A partition was paused and will be read again from `offset` after `delayMs`. */
  'partition:retry': PartitionEventBase & {
    offset: string;
    attempt: number;
    delayMs: number;
    error: SerializedError;
  };
  /**
   * A previous consumer died with these offsets in flight: they run one at a time, alone in the
   * process (no other partition runs meanwhile), each start counted in Postgres.
   */
  'partition:replay': PartitionEventBase & {
    fromOffset: string;
    toOffset: string;
  };
  /** kafkajs joined the group; `assignment` is what this member now owns. */
  'group:joined': { generation: number; memberId: string; assignment: Record<string, number[]> };
  /** kafkajs crashed; `restart` says whether it restarts itself. */
  'consumer:crashed': { error: SerializedError; restart: boolean };
  /** Something failed that was retried or worked around (a commit, a dead-letter send, a marker read). */
  error: { where: string; error: SerializedError; topic?: string; partition?: number };
}
export type KafkaConsumerEventName = keyof KafkaConsumerEventMap;
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
