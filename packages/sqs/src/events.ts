import type { SerializedError } from '@once/core';
import type { ConsumerEventMap } from '@once/core/adapter';

/**
 * Events of an {@link SqsConsumer}: the events every once consumer emits (`consumer:*`,
 * `message:dead-lettered`, `message:killed-consumer`, `error`) plus SQS's own. Core's per-message
 * events are on `consumer.inbox.on(...)`.
 */
export interface SqsConsumerEventMap extends ConsumerEventMap {
  /** A ReceiveMessage call returned `count` messages, `redelivered` of them with ApproximateReceiveCount above 1. */
  received: {
    /** How many messages the call returned (at least 1). */
    count: number;
    /** How many of them SQS had delivered before (ApproximateReceiveCount above 1). */
    redelivered: number;
  };
  /** A ReceiveMessage call failed; the loop waits `backoffMs` and tries again. */
  'receive:error': {
    /** Why the call failed. */
    error: SerializedError;
    /** Failed calls in a row, this one included. */
    consecutive: number;
    /** How long the loop waits before the next call, in ms. */
    backoffMs: number;
  };
  /** A delete after commit failed for one message. Harmless: its redelivery is a duplicate. */
  'delete:failed': {
    /** The SQS MessageId of the message that was not deleted. */
    messageId: string | undefined;
    /** The error code SQS returned for the entry. */
    code: string;
    /** The error message SQS returned for the entry. */
    message: string;
  };
  /** A visibility change (heartbeat, retry delay, release) failed for one message. */
  'visibility:failed': {
    /** The SQS MessageId of the message whose visibility did not change. */
    messageId: string | undefined;
    /** The error code SQS returned for the entry. */
    code: string;
    /** The error message SQS returned for the entry. */
    message: string;
    /** What the change was for: `heartbeat`, `retry`, `release`, `redrive` or `dead-letter retry`. */
    purpose: string;
  };
  /** A message was held past `maxHeldMs`; it is no longer extended and comes back to whoever receives it. */
  'heartbeat:cap': {
    /** The SQS MessageId of the message let go. */
    messageId: string | undefined;
    /** How long it had been held, in ms. */
    heldMs: number;
  };
}
/** The name of an event the SQS consumer emits. */
export type SqsConsumerEventName = keyof SqsConsumerEventMap;
/** A listener of the SQS consumer event `E`, called with its payload. */
export type SqsConsumerEventListener<E extends SqsConsumerEventName> = (
  event: SqsConsumerEventMap[E],
) => void;

/** The events this consumer adds to the kit's, at run time: `on()` refuses any other name. */
export const SQS_CONSUMER_EVENT_NAMES = Object.freeze({
  received: true,
  'receive:error': true,
  'delete:failed': true,
  'visibility:failed': true,
  'heartbeat:cap': true,
} satisfies Record<Exclude<keyof SqsConsumerEventMap, keyof ConsumerEventMap>, true>);
