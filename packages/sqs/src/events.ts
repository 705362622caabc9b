import type { SerializedError } from '@once/core';
import { TypedEmitter } from '@once/core';

/** Events of an SQS consumer, keyed by name. Message outcomes are core's: subscribe on `consumer.inbox`. */
export interface SqsEventMap {
  /** A ReceiveMessage call returned `count` messages, `redelivered` of them with ApproximateReceiveCount above 1. */
  received: { count: number; redelivered: number };
  /** A ReceiveMessage call failed; the loop waits `backoffMs` and tries again. */
  'receive:error': { error: SerializedError; consecutive: number; backoffMs: number };
  /** A delete after commit failed for one message. Harmless: its redelivery is a duplicate. */
  'delete:failed': { messageId: string | undefined; code: string; message: string };
  /** A visibility change (heartbeat, retry delay, release) failed for one message. */
  'visibility:failed': { messageId: string | undefined; code: string; message: string; purpose: string };
  /** A message was held past `maxHeldMs`; it is no longer extended and comes back to whoever receives it. */
  'heartbeat:cap': { messageId: string | undefined; heldMs: number };
  /** A message left the queue as a dead letter (or was left to the redrive policy, or discarded). */
  'dead-letter': {
    messageId: string | undefined;
    id: string | undefined;
    reason: string;
    target: 'queue' | 'redrive' | 'discard';
  };
  /** Sending to the dead-letter queue failed; the message is retried later. */
  'dead-letter:failed': { messageId: string | undefined; error: SerializedError };
}
export type SqsEventName = keyof SqsEventMap;
export type SqsEventListener<E extends SqsEventName> = (event: SqsEventMap[E]) => void;

/** A typed emitter whose throwing listeners are logged and ignored. */
export class SqsEvents extends TypedEmitter<SqsEventMap> {}
