/**
 * Which database a message belongs in, when an inbox serves several (`databases` and `route`).
 * Owns one decision: the database of an envelope, or why it has none. The claim, the handler's
 * writes, its outbox rows and its failure record all live in that database, so a message the
 * router cannot place has nowhere to be recorded: it ends `failed` (`unroutable`), dead-lettered
 * and not recorded, like a message without a usable id.
 *
 * The router must send one id, and one ordering key, to one database. A second database for
 * either would run the id twice (each database has its own record of it) or break the key's
 * order (each database is held and retried on its own). This process remembers the database of
 * the ids and keys it placed most recently and refuses a different answer for them.
 */

import { ErrorCode, OnceError, serializeError } from '../errors.js';
import { type Envelope, resolveId } from '../message/envelope.js';
import { invalidOption } from '../option-check.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import { checkDatabases } from '../schema/databases.js';

/**
 * What `route` answers for a tenant that is being moved to another database: its messages wait
 * (`not-run`, `held`, their attempts unspent) until `route` names a database for them again.
 */
export const HOLD: unique symbol = Symbol.for('once.route.hold');

/**
 * The user's router: the name of the database an envelope belongs in, one of `databases`' names,
 * or {@link HOLD} to keep it waiting.
 */
export type RouteFn = (envelope: Envelope) => string | typeof HOLD;

/** A message the router could not place in one database. Dead-lettered with reason `unroutable`, not recorded. */
export class UnroutableError extends OnceError {
  /** The database name the router gave, when it gave one. */
  readonly database: string | undefined;
  constructor(message: string, database?: string, options?: { cause?: unknown }) {
    super(ErrorCode.Unroutable, message, { retryable: false, ...options });
    this.name = 'UnroutableError';
    this.database = database;
  }
}

/** How many recent ids and keys the consistency check remembers, each: at least half of it, at most all. */
export const ROUTE_MEMORY = 100_000;

/**
 * Where an envelope goes: a database (with the id `idOf` gave, undefined when it has none), nowhere
 * yet (`route` answered {@link HOLD}), or the reason it has none.
 */
export type Placement =
  | { database: string; id: string | undefined }
  | { hold: true }
  | { error: UnroutableError };

/** The resolved `databases` and `route` of an inbox. */
export interface ResolvedRouting {
  /** Name → pool, in the order given; the first is the home database (see `Inbox.noteInflight`). */
  readonly pools: ReadonlyMap<string, PgPoolLike>;
  /** The user's `route`, as given. */
  readonly route: RouteFn;
}

/**
 * Validates `databases` and `route` (both or neither; `pool` not beside them). Returns undefined
 * when the inbox has one `pool`.
 */
export function resolveRouting(o: {
  pool?: unknown;
  databases?: unknown;
  route?: unknown;
}): ResolvedRouting | undefined {
  if (o.databases === undefined) {
    if (o.route !== undefined)
      throw invalidOption('route', "is for an inbox over several databases: give 'databases' too");
    return undefined;
  }
  if (o.pool !== undefined) {
    throw invalidOption('databases', "and 'pool' are two ways to name the database: give one of them");
  }
  const entries = checkDatabases(o.databases);
  if (typeof o.route !== 'function') {
    throw invalidOption(
      'route',
      `must be a function from an envelope to a database name, got ${typeof o.route}`,
    );
  }
  return Object.freeze({ pools: new Map(entries), route: o.route as RouteFn });
}

/** A bounded map that forgets its oldest entries past `max`. */
class Recent {
  // Two generations: new entries go into `young`; when it holds half the bound it becomes `old`
  // and the one before is dropped. So the last max/2 entries are always remembered and never
  // more than max, at O(1) a call. (One Map trimmed from its oldest key costs a scan past every
  // deleted slot on each call: V8 keeps them until it rehashes, and the place took 60 µs.)
  readonly #half: number;
  #young = new Map<string, string>();
  #old = new Map<string, string>();
  constructor(max: number) {
    this.#half = Math.max(1, Math.floor(max / 2));
  }
  get(key: string): string | undefined {
    return this.#young.get(key) ?? this.#old.get(key);
  }
  set(key: string, value: string): void {
    this.#young.set(key, value);
    if (this.#young.size >= this.#half) {
      this.#old = this.#young;
      this.#young = new Map();
    }
  }
  /** Forgets every entry whose value is `value`, or every entry. */
  forget(value?: string): void {
    for (const map of [this.#young, this.#old]) {
      if (value === undefined) map.clear();
      else for (const [k, v] of map) if (v === value) map.delete(k);
    }
  }
}

/**
 * Places envelopes with the user's router and checks its answers: a known name, and the same one
 * for an id and for an ordering key as the last time this process saw them. The ordering key is
 * the envelope's `key` on brokers where it orders messages (Kafka's key, SQS's message group);
 * RabbitMQ's routing key and NATS's subject name a route, not an order, and are not checked.
 */
export class Router {
  readonly #route: RouteFn;
  /** The names a route may answer: `databases`' names, and those added since. */
  readonly #names: Set<string>;
  readonly #idOf: ((envelope: Envelope) => string | undefined) | undefined;
  readonly #ids: Recent;
  readonly #keys: Recent;

  constructor(
    routing: ResolvedRouting,
    idOf: ((envelope: Envelope) => string | undefined) | undefined,
    memory = ROUTE_MEMORY,
  ) {
    this.#route = routing.route;
    this.#names = new Set(routing.pools.keys());
    this.#idOf = idOf;
    this.#ids = new Recent(memory);
    this.#keys = new Recent(memory);
  }

  /** A database added while running: `route` may name it from now on. */
  add(name: string): void {
    this.#names.add(name);
  }

  /** The database names, in the order given. */
  get names(): string[] {
    return [...this.#names];
  }

  /** Where `envelope` goes. Never throws: a throwing router is the message's `unroutable`. */
  place(envelope: Envelope): Placement {
    let name: unknown;
    try {
      name = this.#route(envelope);
    } catch (err) {
      return {
        error: new UnroutableError(
          `route() threw for message ${describeId(envelope)}: ${serializeError(err).message}`,
          undefined,
          {
            cause: err,
          },
        ),
      };
    }
    if (name === HOLD) return { hold: true };
    if (typeof name !== 'string' || !this.#names.has(name)) {
      return {
        error: new UnroutableError(
          `route() gave ${typeof name === 'string' ? `'${name}'` : describeValue(name)} for message ${describeId(envelope)}, which is not one of the databases (${this.names.join(', ')})`,
          typeof name === 'string' ? name : undefined,
        ),
      };
    }
    let id: string | undefined;
    try {
      id = resolveId(envelope, this.#idOf);
    } catch {
      // No usable id: the inbox of its database answers `invalid-id`, recording nothing.
      id = undefined;
    }
    if (id !== undefined) {
      const before = this.#ids.get(id);
      if (before !== undefined && before !== name) {
        return {
          error: new UnroutableError(
            `route() sent message ${JSON.stringify(id)} to '${name}', and the same id to '${before}' before: one id must stay in one database, or it runs once in each`,
            name,
          ),
        };
      }
    }
    const key = orderingKeyOf(envelope);
    if (key !== undefined) {
      const slot = `${envelope.source.queue}\u0000${key}`;
      const before = this.#keys.get(slot);
      if (before !== undefined && before !== name) {
        return {
          error: new UnroutableError(
            `route() sent key ${JSON.stringify(key)} of ${JSON.stringify(envelope.source.queue)} to '${name}', and the same key to '${before}' before (message ${describeId(envelope)}): one key must stay in one database, or its order is lost`,
            name,
          ),
        };
      }
      this.#keys.set(slot, name);
    }
    if (id !== undefined) this.#ids.set(id, name);
    return { database: name, id };
  }

  /**
   * Forgets which database the ids and keys placed in `database` (or in any) went to, so that a
   * tenant moved from it (held, copied, switched: docs/operations.md) can be routed elsewhere.
   */
  forget(database?: string): void {
    this.#ids.forget(database);
    this.#keys.forget(database);
  }
}

/** The key that orders messages on the envelope's broker, if it has one. */
function orderingKeyOf(envelope: Envelope): string | undefined {
  const broker = envelope.source?.broker;
  if (broker !== 'kafka' && broker !== 'sqs') return undefined;
  return envelope.key === undefined || envelope.key === '' ? undefined : envelope.key;
}

function describeId(envelope: Envelope): string {
  return typeof envelope.id === 'string' ? JSON.stringify(envelope.id) : '(no id)';
}

function describeValue(value: unknown): string {
  return value === null ? 'null' : value === undefined ? 'undefined' : `a ${typeof value}`;
}
