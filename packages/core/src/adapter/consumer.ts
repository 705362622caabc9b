import type { SerializedError } from '../errors.js';
import type { Inbox } from '../inbox.js';
import type { EnvelopeSource } from '../message/envelope.js';
import type { EventNames } from '../message/events.js';
import type { FailReason } from '../message/outcome.js';

/**
 * Where a consumer is in its life, the same on every broker:
 * `idle` → `starting` → `running` (⇄ `reconnecting`) → `stopping` → `stopped`; `failed` when
 * `start()` could not reach the broker (a new consumer must be made).
 */
export type ConsumerState =
  | 'idle'
  | 'starting'
  | 'running'
  | 'reconnecting'
  | 'stopping'
  | 'stopped'
  | 'failed';

/** The part of `health()` every consumer reports; adapters add their broker's fields. */
export interface ConsumerHealth {
  /** The consumer's state now. */
  state: ConsumerState;
  /**
   * True while running, the database and once's schema are usable (`available`), and nothing
   * the adapter watches is wrong (a broker connection, a stopped partition).
   */
  healthy: boolean;
  /**
   * False while the database is unreachable or once's schema is missing or too new: the
   * consumer then fetches nothing, and starts again once the schema checks out.
   */
  available: boolean;
  /**
   * With `databases`: the databases whose messages wait because the last one routed there found
   * it unusable. The consumer stays `available` and `healthy` while any database is usable, and
   * the others' messages run. Empty with one `pool`.
   */
  unavailableDatabases: string[];
  /** The last error the consumer handled itself, with where it happened and when (epoch ms). */
  lastError:
    | (SerializedError & {
        /** Where it happened, a short tag such as `database`, `connection` or `handler`. */
        where: string;
        /** When the consumer handled it, in epoch milliseconds. */
        at: number;
      })
    | undefined;
}

/**
 * Events every consumer emits, whatever its broker; adapters extend the map. Per-message events
 * (`message:processed`, …) come from the inbox: `consumer.inbox.on(...)`.
 */
export interface ConsumerEventMap {
  /** The consumer moved from `previous` to `state`. */
  'consumer:state': {
    /** The state the consumer is in now. */
    state: ConsumerState;
    /** The state it left. */
    previous: ConsumerState;
  };
  /** The database or once's schema cannot be used: the consumer stopped fetching. */
  'consumer:paused': {
    /** Why the database or schema cannot be used (a connection error, a missing or too new schema). */
    error: SerializedError;
  };
  /** The schema checked out again after `pausedMs`: fetching resumed. */
  'consumer:resumed': {
    /** How long fetching was paused, in milliseconds. */
    pausedMs: number;
  };
  /**
   * A message failed for good and left the source: copied to `deadLetter` (a topic, an exchange,
   * a queue), or, with dead-lettering off (`deadLetter` undefined), dropped with an error log line.
   */
  'message:dead-lettered': {
    /** The message id; undefined when it had no usable one (reason `invalid-id`). */
    id: string | undefined;
    /** Why it failed for good, or `conflict` when a processed message had the same id and another payload. */
    reason: FailReason | 'conflict';
    /** Where the message came from (broker, topic or queue, ...). */
    source: EnvelopeSource;
    /**
     * Where it was copied (a topic, an exchange, a queue); undefined with dead-lettering off, when it was
     * dropped.
     */
    deadLetter: string | undefined;
    /**
     * True when a `failed` inbox row holds the message (body, error, origin; `once failed list`):
     * reasons `permanent`, `max-attempts`, `previously-failed`. False for `invalid-id` (no id to
     * record under) and `conflict` (the id's row is the processed message's).
     */
    recorded: boolean;
    /** The error that ended the message (a conflict's names the differing fingerprint). */
    error: SerializedError;
    /** The attempt it ended at (1 for a first delivery). */
    attempts: number;
  };
  /**
   * A message was started alone `starts` times (counted in PostgreSQL) without completing: the
   * process died while it ran. It is not run again but recorded `failed` (`max-attempts`).
   */
  'message:killed-consumer': {
    /** The message id; undefined when the message had no usable one. */
    id: string | undefined;
    /** How many times it was started alone without completing, as counted in PostgreSQL. */
    starts: number;
    /** Where the message came from (broker, topic or queue, ...). */
    source: EnvelopeSource;
  };
  /** Something failed that the consumer retried or worked around; never thrown. */
  error: {
    /** Where it happened, a short tag such as `database`, `connection` or `handler`. */
    where: string;
    /** What failed, serialized for logs. */
    error: SerializedError;
  };
}

/** The kit's event names, at run time: an adapter spreads them into its own. */
export const CONSUMER_EVENT_NAMES: EventNames<ConsumerEventMap> = Object.freeze({
  'consumer:state': true,
  'consumer:paused': true,
  'consumer:resumed': true,
  'message:dead-lettered': true,
  'message:killed-consumer': true,
  error: true,
});

/**
 * What every once consumer is, whatever its broker: started and stopped once, a state, a health
 * snapshot, the inbox it processes through, and typed events from one emitter.
 */
export interface Consumer<
  R = unknown,
  M extends ConsumerEventMap = ConsumerEventMap,
  H extends ConsumerHealth = ConsumerHealth,
> extends AsyncDisposable {
  /** The inbox doing the processing; per-message events are on `inbox.on(...)`. */
  readonly inbox: Inbox<R>;
  /** Where the consumer is in its life: `idle`, `running`, `stopped`, ... */
  readonly state: ConsumerState;
  /**
   * Connects and starts consuming. Rejects when the broker cannot be reached or refuses the
   * subscription; never because of the database: while it or once's schema is not usable the
   * consumer runs unhealthy and fetches nothing, and begins once the schema checks out.
   */
  start(): Promise<void>;
  /** Stops fetching, lets in-flight messages settle (up to `stopTimeoutMs`), closes. Idempotent. */
  stop(): Promise<void>;
  /** The consumer's health now, for a readiness probe: its state, the database's, the broker's. */
  health(): H;
  /** Subscribes to a consumer event; returns an unsubscribe function. */
  on<E extends keyof M>(name: E, listener: (event: M[E]) => void): () => void;
}
