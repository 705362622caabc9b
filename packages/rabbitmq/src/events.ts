import type { Outcome, SerializedError } from '@once/core';
import type { ConsumerEventMap, DeadLetterRecord } from '@once/core/adapter';

/** What the consumer does with a delivery once core's plan is known, in RabbitMQ's terms. */
export type RabbitSettlePlan =
  | {
      /** Ack the delivery: it is done. */
      kind: 'ack';
    }
  /** Republish to the retry queue of `tierMs` with `attempt` in our header, then ack. */
  | {
      /** Republish to a retry queue, then ack. */
      kind: 'retry';
      /**
       * The delay of the retry queue it goes to, in ms: the smallest of `retryTiersMs` at least
       * as long as the backoff.
       */
      tierMs: number;
      /** The attempt the redelivery carries in once's header. */
      attempt: number;
    }
  /** Run again from our prefetch window, at once: an earlier message stopped it. */
  | {
      /** Run it again at once, unchanged. */
      kind: 'rerun';
    }
  /** Publish to the dead-letter exchange with the record in a header, then ack. */
  | {
      /** Publish to the dead-letter exchange, then ack. */
      kind: 'dead-letter';
      /** What the copy carries in once's dead-letter header: reason, error, origin. */
      record: DeadLetterRecord;
    };

/**
 * Events of a {@link RabbitConsumer}: the events every once consumer emits (`consumer:*`,
 * `message:dead-lettered`, `message:killed-consumer`, `error`) plus RabbitMQ's own. Core's
 * per-message events are on `consumer.inbox.on(...)`.
 */
export interface RabbitConsumerEventMap extends ConsumerEventMap {
  /** A connection and its channel are up (and consuming, unless the database is unusable). */
  connected: {
    /** Successful reconnects since the consumer started; 0 for the first connection. */
    reconnects: number;
  };
  /** The connection or its channel was lost; unacked deliveries return to the queue. */
  disconnected: {
    /** Why the connection or channel was lost; undefined when the client gave no error. */
    error: SerializedError | undefined;
  };
  /** A reconnect attempt is scheduled after `delayMs`. */
  'reconnect-scheduled': {
    /** The reconnect attempt this is, counted from 1 since the last loss. */
    attempt: number;
    /** How long until the attempt, in ms, from the `reconnectDelayMs` option. */
    delayMs: number;
    /** The error of the loss or of the previous attempt. */
    error: SerializedError;
  };
  /** A delivery was settled: acked, sent to a retry tier, or dead-lettered. */
  settled: {
    /** The message id; undefined when the message had no usable one. */
    id: string | undefined;
    /** The outcome's status, as the inbox returned it. */
    status: Outcome['status'];
    /** What was done with the delivery: `ack`, `retry`, `rerun` or `dead-letter`. */
    plan: RabbitSettlePlan['kind'];
  };
}
/** The name of an event the RabbitMQ consumer emits. */
export type RabbitConsumerEventName = keyof RabbitConsumerEventMap;
/** A listener of the RabbitMQ consumer event `E`, called with its payload. */
export type RabbitConsumerEventListener<E extends RabbitConsumerEventName> = (
  event: RabbitConsumerEventMap[E],
) => void;

/** The events this consumer adds to the kit's, at run time: `on()` refuses any other name. */
export const RABBIT_CONSUMER_EVENT_NAMES = Object.freeze({
  connected: true,
  disconnected: true,
  'reconnect-scheduled': true,
  settled: true,
} satisfies Record<Exclude<keyof RabbitConsumerEventMap, keyof ConsumerEventMap>, true>);
