import type { FailReason, SerializedError } from '@once/core';
import { TypedEmitter } from '@once/core';

interface PartitionEventBase {
  topic: string;
  partition: number;
}

/**
 * Every event the Kafka consumer emits, keyed by name. Per-message events (`message:processed`,
 * ...) come from the inbox: subscribe with `consumer.inbox.on(...)`.
 */
export interface KafkaConsumerEventMap {
  /** A slice's transaction committed and its offsets were resolved (and committed to Kafka unless noted). */
  'slice:done': PartitionEventBase & {
    firstOffset: string;
    lastOffset: string;
    messages: number;
    durationMs: number;
  };
  /**
   * A message failed for good and its offset moves on: it went to `deadLetterTopic`, or, with
   * dead-lettering off (`deadLetterTopic` undefined), it was skipped with an error log line.
   */
  'message:dead-lettered': PartitionEventBase & {
    offset: string;
    id: string | undefined;
    reason: FailReason | 'conflict';
    deadLetterTopic: string | undefined;
    /**
     * True when a `failed` inbox row holds the message (body, error, origin; `once failed list`):
     * reasons `permanent`, `max-attempts`, `previously-failed`. False for `invalid-id` (no id to
     * record under) and `conflict` (the id's row is the processed message's): with dead-lettering
     * off, the log line is then the only trace.
     */
    recorded: boolean;
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
   * consumer (no other partition runs meanwhile), each start counted in Postgres.
   */
  'partition:replay': PartitionEventBase & {
    fromOffset: string;
    toOffset: string;
  };
  /**
   * A message was started alone `starts` times (counted in Postgres) and never completed: the
   * process died while it ran. It is not run again but recorded failed and dead-lettered.
   */
  'message:killed-consumer': PartitionEventBase & { offset: string; starts: number };
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

/** A typed emitter whose throwing listeners are logged and ignored. */
export class KafkaConsumerEvents extends TypedEmitter<KafkaConsumerEventMap> {}
