import type { Logger } from '../logger.js';
import type { OnceEventMap } from '../message/events.js';
import { checkInteger, invalidOption, namingFactory } from '../option-check.js';
import { checkDatabases } from '../schema/databases.js';
import { DatabaseRelay } from './database-relay.js';
import {
  DEFAULT_RELAY_CONCURRENCY,
  DEFAULT_RELAY_MAX_LISTENERS,
  type RelayDatabaseHealth,
  type RelayHealth,
  type RelayOptions,
  type RelaySettings,
} from './relay-options.js';
import { RoundGate } from './round-gate.js';

/** One database's relay in a {@link Relay}, and what the relay knows of it. */
interface Served {
  name: string;
  relay: DatabaseRelay;
  /** Polled because `maxListeners` databases before it hold the listeners. */
  pastListenerCap: boolean;
}

/**
 * Publishes outbox rows: those of one database (`pool`), or those of several (`databases`), each
 * served by the same machinery as one database alone. Any number of relays may run, each running
 * up to `concurrency` rounds at once: each round claims rows with `FOR UPDATE SKIP LOCKED` in its
 * own transaction (only the oldest pending row of a key is eligible), publishes them while
 * holding the claim, and marks a row sent only once its broker confirmed it, committing after
 * that. A relay that dies mid-round leaves its rows pending: they are sent again, with the same
 * id, and downstream inboxes drop the copy.
 *
 * Over several databases each keeps its own rows, claims, attempts, parking, cleanup and order
 * per key (a round claims, publishes and settles in one database; nothing crosses databases);
 * the publishers are shared, and `concurrency` is one budget that the databases with work take
 * in turn. The first `maxListeners` databases get a LISTEN connection each, the rest are polled.
 * A database that is down fails its own rounds only (they back off as a single relay's do): the
 * others go on, and its rows go out once it is back.
 */
export class Relay {
  readonly #served: readonly Served[];
  /** Set with `databases`: health and errors name the database. */
  readonly #named: boolean;

  /** Use {@link createRelay}, which names itself in option errors. */
  constructor(options: RelayOptions) {
    if (!options || typeof options !== 'object') {
      throw invalidOption('', 'must be an object with pool or databases, and publishers');
    }
    const hasPool = options.pool !== undefined;
    const hasDatabases = options.databases !== undefined;
    if (hasPool === hasDatabases) {
      throw invalidOption(
        'pool',
        `${hasPool ? "and 'databases' are both given" : "or 'databases' must be given"}: 'pool' for one database, 'databases' for several, not both`,
      );
    }
    if (options.databases === undefined) {
      if (options.maxListeners !== undefined) {
        throw invalidOption('maxListeners', "goes with 'databases', not with 'pool'");
      }
      this.#named = false;
      this.#served = [{ name: '', relay: new DatabaseRelay(options), pastListenerCap: false }];
      return;
    }
    const { databases, maxListeners, ...settings } = options;
    const entries = checkDatabases(databases);
    const listeners = checkInteger('maxListeners', maxListeners ?? DEFAULT_RELAY_MAX_LISTENERS, 0);
    const concurrency = settings.concurrency ?? DEFAULT_RELAY_CONCURRENCY;
    const gate = new RoundGate(
      // Checked, with the field named, by each database's relay below; a bad value never runs.
      typeof concurrency === 'number' && concurrency >= 1 ? concurrency : 1,
      entries.map(([name]) => name),
    );
    this.#named = true;
    this.#served = entries.map(([name, pool], i) => {
      const pastListenerCap = i >= listeners;
      const own: RelaySettings & { pool: typeof pool } = {
        ...settings,
        pool,
        listen: pastListenerCap ? false : settings.listen,
        logger: settings.logger ? namedLogger(settings.logger, name) : settings.logger,
      };
      const relay = new DatabaseRelay(own, (signal) => gate.enter(name, signal));
      return { name, relay, pastListenerCap };
    });
  }

  /**
   * Subscribe to `outbox:published`, `outbox:publish-failed`, `outbox:parked`. Over several
   * databases each event carries the name of the database its rows are in (`database`).
   */
  on<E extends keyof OnceEventMap>(name: E, listener: (event: OnceEventMap[E]) => void): () => void {
    if (!this.#named) return this.#served[0]!.relay.on(name, listener);
    const offs = this.#served.map(({ name: database, relay }) =>
      relay.on(name, (event) => listener({ ...event, database })),
    );
    return () => {
      for (const off of offs) off();
    };
  }

  /**
   * Whether the relay runs, listens, and what it has published and parked; no database round
   * trip. Over several databases, `databases` holds each one's state and the rest sums it up.
   */
  health(): RelayHealth {
    if (!this.#named) return this.#served[0]!.relay.health();
    const databases: RelayDatabaseHealth[] = this.#served.map(({ name, relay, pastListenerCap }) => {
      const h = relay.health();
      return {
        name,
        listening: h.listening,
        pollingOnly: h.pollingOnly,
        pastListenerCap,
        lastRoundAt: h.lastRoundAt,
        lastError: h.lastError,
        published: h.published,
        parked: h.parked,
      };
    });
    const failing = databases.find((d) => d.lastError !== undefined);
    const rounds = databases.flatMap((d) => (d.lastRoundAt === undefined ? [] : [d.lastRoundAt]));
    return {
      running: this.#served[0]!.relay.health().running,
      listening: databases.some((d) => d.listening),
      pollingOnly: databases.every((d) => d.pollingOnly),
      lastRoundAt: rounds.length > 0 ? Math.max(...rounds) : undefined,
      lastError: failing ? `${failing.name}: ${failing.lastError}` : undefined,
      published: databases.reduce((n, d) => n + d.published, 0),
      parked: databases.reduce((n, d) => n + d.parked, 0),
      databases,
    };
  }

  /**
   * Starts relaying in the background until {@link Relay.stop}. Over several databases, resolves
   * once every database's relay has started (its LISTEN set up, or given up for polling).
   */
  async start(): Promise<void> {
    await Promise.all(this.#served.map(({ relay }) => relay.start()));
  }

  /**
   * Stops and releases the LISTEN connections. No publisher is called once `stop()` has begun.
   * Every round under way is abandoned: publish calls in flight are given up as at the deadline
   * (their rows stay pending, attempts unchanged, and the next relay sends them again under the
   * same id; what the broker took meanwhile is a duplicate that inboxes drop), and a claim in
   * flight is rolled back when it returns, its rows left as they were. So `stop()` returns once
   * the statements in flight have ended, whatever the publishers do; over several databases,
   * once that holds in every database.
   */
  async stop(): Promise<void> {
    await Promise.all(this.#served.map(({ relay }) => relay.stop()));
  }

  /** `await using relay = createRelay(...)`: stops the relay at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /**
   * One round: claim, publish, record. Returns the number of rows claimed. Over several
   * databases, one round in each (within the `concurrency` budget), and the rows claimed in all;
   * when a database's round fails, the first such error as it was thrown, once every round has
   * ended (`health().databases` names the database).
   * Exposed for tests and for callers that drive the relay themselves.
   */
  async runOnce(): Promise<number> {
    if (!this.#named) return this.#served[0]!.relay.runOnce();
    const outcomes = await Promise.allSettled(this.#served.map(({ relay }) => relay.runOnce()));
    let claimed = 0;
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') throw outcome.reason;
      claimed += outcome.value;
    }
    return claimed;
  }
}

/** Creates a {@link Relay}; call `start()` to run it. */
export function createRelay(options: RelayOptions): Relay {
  return namingFactory('createRelay', () => new Relay(options));
}

/** The user's logger with the database's name on every line (`database`). */
function namedLogger(logger: Logger, database: string): Logger {
  return {
    debug: (fields, message) => logger.debug({ database, ...fields }, message),
    info: (fields, message) => logger.info({ database, ...fields }, message),
    warn: (fields, message) => logger.warn({ database, ...fields }, message),
    error: (fields, message) => logger.error({ database, ...fields }, message),
  };
}
