import type { EnvelopeSource } from './envelope.js';
import type { SerializedError } from './errors.js';
import type { Logger } from './logger.js';
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
}

/** Every event once emits, keyed by name. Events about a message fire after COMMIT and before the adapter settles. */
export interface OnceEventMap {
  /** The handler ran and its transaction committed. */
  'message:processed': MessageEventBase & { id: string };
  /** The id was processed before: nothing ran. */
  'message:duplicate': MessageEventBase & { id: string };
  /** Same id as a processed message, different payload. */
  'message:conflict': MessageEventBase & { id: string; action: 'dead-letter' | 'ack' };
  /** Recorded failed (or not recordable): the adapter dead-letters it. */
  'message:failed': MessageEventBase & { reason: FailReason; error: SerializedError };
  /** A started message failed transiently; `spent`: the attempt counted toward maxAttempts. */
  'message:retry': MessageEventBase & { error: SerializedError; delayMs: number; spent: boolean };
  /** The handler never started (see NotRunOutcome): never spent, never dead-lettered. */
  'message:not-run': MessageEventBase & {
    why: 'behind' | 'unavailable';
    error: SerializedError;
    delayMs: number;
  };
  /** Another worker holds the id: redelivered later. */
  'message:busy': MessageEventBase & { id: string };
  /**
   * A handler run settled (returned, threw, or passed its deadline), before its transaction
   * commits or rolls back; `durationMs` is the handler's own time. `error` is set when it failed.
   */
  'handler:settled': MessageEventBase & { id: string; error: SerializedError | undefined };
  /** Lease mode: a claim took the id over from an owner whose lease had run out (a crashed or stalled worker). */
  'lease:takeover': { consumer: string; id: string; source: EnvelopeSource; attempt: number };
  /** The relay published `count` rows in one round. */
  'outbox:published': { count: number };
  /** A row's publish failed; it is retried until the relay's `maxAttempts`. */
  'outbox:publish-failed': { id: string; destination: string; attempts: number; error: SerializedError };
  /** A row reached the relay's `maxAttempts` (or was refused for good) and is parked. */
  'outbox:parked': { id: string; destination: string; error: SerializedError };
}
export type OnceEventName = keyof OnceEventMap;
export type OnceEventListener<E extends OnceEventName> = (event: OnceEventMap[E]) => void;

/**
 * A tiny typed emitter over an event map, shared by core and the adapters. A listener that
 * throws is logged and otherwise ignored: observability must never change what happens to a
 * message.
 */
export class TypedEmitter<M extends object> {
  readonly #listeners = new Map<keyof M, Set<(event: never) => void>>();
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Subscribe; returns an unsubscribe function. */
  on<E extends keyof M>(name: E, listener: (event: M[E]) => void): () => void {
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
