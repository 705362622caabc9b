/**
 * Where an engine's requests run: one `pool`, or `databases` and `route`. Owns one decision: that
 * exactly one of the two ways is given, and given well (a set of named pools, a router), each
 * refusal naming its field as core's inbox names it.
 */

import type { PgPoolLike } from '@once/core';
import { checkDatabases, optionCheck } from '@once/core/adapter';
import type { IdempotentRequest } from './types.js';

/**
 * The router of an engine over several databases (`databases`): the name of the database a
 * request belongs in, one of `databases`' names, from the request as the binding handed it over
 * (method, target, route name, headers, body): a tenant header, a path prefix. It must send one
 * key (scope and `Idempotency-Key`) to one database. A router that throws, or names no database
 * of the set, has the request answered 500 `unroutable`, with nothing recorded anywhere.
 */
export type RequestRouter = (request: IdempotentRequest) => string;

/** Where the requests run, checked: one pool, or the named pools and the router. */
export interface Place {
  readonly pool: PgPoolLike | undefined;
  readonly databases: ReadonlyMap<string, PgPoolLike> | undefined;
  readonly route: RequestRouter | undefined;
}

/** `pool`, or `databases` and `route`: exactly one of the two ways, each checked. */
export function placeOf(o: { pool?: unknown; databases?: unknown; route?: unknown }): Place {
  if (o.databases === undefined) {
    if (o.route !== undefined) {
      throw optionCheck.invalid('route', "is for an engine over several databases: give 'databases' too");
    }
    if (!isPool(o.pool)) {
      throw optionCheck.invalid(
        'pool',
        "must be a pg Pool (new pg.Pool(...)), or give 'databases' and 'route' instead",
      );
    }
    return { pool: o.pool, databases: undefined, route: undefined };
  }
  if (o.pool !== undefined) {
    throw optionCheck.invalid('databases', "and 'pool' are two ways to name the database: give one of them");
  }
  // The set is checked as core's inbox checks it: an object, at least one, each name and pool.
  const entries = checkDatabases(o.databases);
  if (typeof o.route !== 'function') {
    throw optionCheck.invalid(
      'route',
      `must be a function from a request to a database name, got ${describe(o.route)}`,
    );
  }
  return {
    pool: undefined,
    databases: new Map(entries),
    route: o.route as RequestRouter,
  };
}

function isPool(p: unknown): p is PgPoolLike {
  const pool = p as Partial<PgPoolLike> | null | undefined;
  return (
    typeof pool === 'object' &&
    pool !== null &&
    typeof pool.query === 'function' &&
    typeof pool.connect === 'function'
  );
}

function describe(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}
