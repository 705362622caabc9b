import type { SerializedError } from '../errors.js';
import { ErrorCode, OnceError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { EnvelopeSource } from './envelope.js';
import type { FailReason } from './outcome.js';

/** What every `message:*` event of the inbox carries. */
export interface MessageEventBase {
  /** The consumer name the inbox records under. */
  consumer: string;
  /** The message id, when it had a usable one. */
  id: string | undefined;
  /** Where the message came from (the envelope's source: broker, topic or queue, ...). */
  source: EnvelopeSource;
  /** Time from the start of processing to the outcome, in milliseconds. */
  durationMs: number;
  /**
   * With `databases`: the name of the database the message was routed to. Absent for an inbox
   * over one `pool`, and for a message that could not be routed.
   */
  database?: string;
}

/** Every event once emits, keyed by name. Events about a message fire after COMMIT and before the adapter settles. */
export interface OnceEventMap {
  /** The handler ran and its transaction committed. */
  'message:processed': MessageEventBase & {
    /** The message id, now recorded `done` under the consumer. */
    id: string;
  };
  /** The id was processed before: nothing ran. */
  'message:duplicate': MessageEventBase & {
    /** The message id, found already recorded `done` with the same payload fingerprint. */
    id: string;
  };
  /** Same id as a processed message, different payload. */
  'message:conflict': MessageEventBase & {
    /** The message id whose stored fingerprint differs from this payload's. */
    id: string;
    /** What the adapter does with it, from the consumer's `onConflict` option (`dead-letter` by default). */
    action: 'dead-letter' | 'ack';
  };
  /** Recorded failed (or not recordable): the adapter dead-letters it. */
  'message:failed': MessageEventBase & {
    /** Why it failed for good: attempts spent, a permanent error, an unusable id, and so on. */
    reason: FailReason;
    /** The error that ended it, serialized as it is stored in the inbox row. */
    error: SerializedError;
  };
  /** A started message failed transiently; `spent`: the attempt counted toward maxAttempts. */
  'message:retry': MessageEventBase & {
    /** The transient error the handler (or its commit) ended with. */
    error: SerializedError;
    /** How long the adapter waits before the redelivery, in milliseconds, from the backoff. */
    delayMs: number;
    /** True when this attempt counted toward `maxAttempts`; false for a retry that does not spend one. */
    spent: boolean;
  };
  /** The handler never started (see NotRunOutcome): never spent, never dead-lettered. */
  'message:not-run': MessageEventBase & {
    /**
     * `behind`: an earlier message in its batch, partition or group must be retried first;
     * `unavailable`: the database cannot be reached, or once's schema is missing or too new;
     * `held`: a routed inbox's `route` answered `HOLD`.
     */
    why: 'behind' | 'unavailable' | 'held';
    /** The error that kept the handler from starting. */
    error: SerializedError;
    /** How long the adapter waits before the redelivery, in milliseconds. */
    delayMs: number;
  };
  /** Another worker holds the id: redelivered later. */
  'message:busy': MessageEventBase & {
    /** The message id another worker's claim holds right now. */
    id: string;
  };
  /**
   * A handler run settled (returned, threw, or passed its deadline), before its transaction
   * commits or rolls back; `durationMs` is the handler's own time. `error` is set when it failed.
   */
  'handler:settled': MessageEventBase & {
    /** The id of the message the handler ran for. */
    id: string;
    /** What the handler threw (or the deadline error); undefined when it returned. */
    error: SerializedError | undefined;
  };
  /** Lease mode: a claim took the id over from an owner whose lease had run out (a crashed or stalled worker). */
  'lease:takeover': {
    /** The consumer name the lease is recorded under. */
    consumer: string;
    /** The message id whose lease was taken over. */
    id: string;
    /** Where the message came from (broker, topic or queue, ...). */
    source: EnvelopeSource;
    /** The attempt number the inbox row records for the new claim, the lost owner's attempts included. */
    attempt: number;
  };
  /** The relay published `count` rows in one round. */
  'outbox:published': {
    /** How many outbox rows the round published and marked sent (at least 1). */
    count: number;
    /** The database the rows are in, when the relay serves several (`createRelay({ databases })`). */
    database?: string;
  };
  /** A row's publish failed; it is retried until the relay's `maxAttempts`. */
  'outbox:publish-failed': {
    /** The outbox row's id (a UUID). */
    id: string;
    /** The destination the row is addressed to (topic, queue, exchange or subject). */
    destination: string;
    /** Publish attempts made for this row so far, this one included. */
    attempts: number;
    /** What the publisher returned or threw. */
    error: SerializedError;
    /** The database the row is in, when the relay serves several (`createRelay({ databases })`). */
    database?: string;
  };
  /** A row reached the relay's `maxAttempts` (or was refused for good) and is parked. */
  'outbox:parked': {
    /** The outbox row's id (a UUID); `once outbox retry` takes it to publish it again. */
    id: string;
    /** The destination the row is addressed to (topic, queue, exchange or subject). */
    destination: string;
    /** The last error, stored on the parked row. */
    error: SerializedError;
    /** The database the row is in, when the relay serves several (`createRelay({ databases })`). */
    database?: string;
  };
}
export type OnceEventName = keyof OnceEventMap;
export type OnceEventListener<E extends OnceEventName> = (event: OnceEventMap[E]) => void;

/** Every name of an event map, as an object the compiler checks for completeness. */
export type EventNames<M> = { readonly [K in keyof M]-?: true };

/** The inbox's and relay's event names, at run time. */
export const ONCE_EVENT_NAMES: EventNames<OnceEventMap> = Object.freeze({
  'message:processed': true,
  'message:duplicate': true,
  'message:conflict': true,
  'message:failed': true,
  'message:retry': true,
  'message:not-run': true,
  'message:busy': true,
  'handler:settled': true,
  'lease:takeover': true,
  'outbox:published': true,
  'outbox:publish-failed': true,
  'outbox:parked': true,
});

/**
 * Names that were events of an earlier 0.x (CHANGELOG's rename tables), or that belong to the
 * other emitter, with what to subscribe to instead: an upgrade that still listens to them is told,
 * where it would otherwise never hear a thing.
 */
const INSTEAD: Readonly<Record<string, string>> = Object.freeze({
  'dead-letter': "'message:dead-lettered' on the consumer",
  'dead-letter:failed': "'error' on the consumer (its `where` is 'dead-letter')",
  'message:dead-letter': "'message:dead-lettered' on the consumer",
  'message:dead-lettered': "consumer.on('message:dead-lettered'), not inbox.on",
  'message:killed-consumer': "consumer.on('message:killed-consumer'), not inbox.on",
  'message:processed': "consumer.inbox.on('message:processed'): per-message events are the inbox's",
  'message:duplicate': "consumer.inbox.on('message:duplicate'): per-message events are the inbox's",
  'message:failed': "consumer.inbox.on('message:failed'): per-message events are the inbox's",
  'message:retry': "consumer.inbox.on('message:retry'): per-message events are the inbox's",
});

/**
 * Refuses a subscription to a name outside `names`: a listener on a name nobody emits never
 * fires, which would silently drop (say) dead-letter alerting after an upgrade.
 */
export function checkEventName(owner: string, names: object, name: PropertyKey): void {
  if (typeof name === 'string' && Object.hasOwn(names, name)) return;
  const text = String(name);
  const hint = Object.hasOwn(INSTEAD, text) ? `; use ${INSTEAD[text]}` : '';
  throw new OnceError(
    ErrorCode.UnknownEvent,
    `${owner}.on: '${text}' is not an event of ${owner}${hint}. Its events: ${Object.keys(names).join(', ')}`,
  );
}

/**
 * A tiny typed emitter over an event map, shared by core and the adapters. A listener that
 * throws is logged and otherwise ignored: observability must never change what happens to a
 * message.
 */
export class TypedEmitter<M extends object> {
  readonly #listeners = new Map<keyof M, Set<(event: never) => void>>();
  readonly #logger: Logger;

  readonly #names: { owner: string; names: { readonly [K in keyof M]-?: true } } | undefined;

  /** With `names`, `on()` refuses any other name (`UNKNOWN_EVENT`, naming `owner`). */
  constructor(logger: Logger, names?: { owner: string; names: { readonly [K in keyof M]-?: true } }) {
    this.#logger = logger;
    this.#names = names;
  }

  /** Subscribe; returns an unsubscribe function. */
  on<E extends keyof M>(name: E, listener: (event: M[E]) => void): () => void {
    if (this.#names) checkEventName(this.#names.owner, this.#names.names, name);
    let set = this.#listeners.get(name);
    if (!set) {
      set = new Set();
      this.#listeners.set(name, set);
    }
    set.add(listener as (event: never) => void);
    return () => set.delete(listener as (event: never) => void);
  }

  /** Whether anyone listens to `name`: lets callers skip building an event nobody reads. */
  has(name: keyof M): boolean {
    return (this.#listeners.get(name)?.size ?? 0) > 0;
  }

  /** Calls every listener of `name` with `event`; a listener that throws is logged and skipped. */
  emit<E extends keyof M>(name: E, event: M[E]): void {
    const set = this.#listeners.get(name);
    if (!set) return;
    for (const listener of set) {
      try {
        (listener as (event: M[E]) => void)(event);
      } catch (err) {
        this.#logger.warn(
          {
            event: String(name),
            error: String(err),
          },
          'once: an event listener threw; ignored',
        );
      }
    }
  }
}

/** Core's own events (inbox, purge, relay). */
export class Events extends TypedEmitter<OnceEventMap> {}
