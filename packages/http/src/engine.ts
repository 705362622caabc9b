import type { Envelope, HandlerContext, Inbox, Logger, PgPoolLike, ProcessOptions } from '@once/core';
import { UnroutableError } from '@once/core';
import {
  createHttpInbox,
  databaseOptions,
  type StoredHttpResponse,
  serializeError,
  silentLogger,
  UnclaimedTx,
} from '@once/core/adapter';
import { answerOf, type KeyAnswer } from './answer.js';
import { fingerprintInput } from './fingerprint.js';
import { legacyInputOf } from './fingerprint-upgrade.js';
import { parseIdempotencyKey } from './key.js';
import {
  checkHeaderNames,
  type IdempotencyOptions,
  type ResolvedIdempotencyOptions,
  resolveIdempotencyOptions,
} from './options.js';
import { formatProblem, HttpProblem, problemResponse } from './problem.js';
import { checkResponse, isStorable, replayOf, storableHeaders } from './response.js';
import { type HttpResponseToStore, readStoredResponse, type StoredHttpRow } from './response-store.js';
import { messageIdOf, scopeProblem } from './scope.js';
import type {
  HandleResult,
  HttpResponseData,
  IdempotentContext,
  IdempotentRequest,
  RouteOptions,
  RunHandler,
} from './types.js';
import { runUnkeyed } from './unkeyed.js';

/** One request's run, handed to the inbox as the call's handler. */
interface Job {
  readonly run: RunHandler;
  readonly key: string;
  readonly scope: string;
  /** The database the key lives in. */
  readonly place: Place;
  /** What the handler answered, once stored (processed). */
  answered?: HttpResponseData;
  /** What the handler answered when it is not to be stored (5xx, 408, 409, 425, 429). */
  unstored?: HttpResponseData;
}

/** Thrown inside the key's transaction to roll it back when the answer is not to be kept. */
class NotStored extends Error {}

/** The database a request runs in: its pool (for reads of once's own) and its unclaimed transactions. */
interface Place {
  /** The database's name, with `databases`; undefined over one `pool`. */
  readonly database: string | undefined;
  /** The pool as the user gave it: the stored-response and legacy-fingerprint reads run on it. */
  readonly pool: PgPoolLike;
  /** Requests without a key, in this database. */
  readonly unclaimed: UnclaimedTx;
}

/**
 * The framework-neutral engine of `@once/http`: one per service (or per consumer name). Bindings
 * (`@once/http/fetch`, `/node`, `/fastify`, `/express`) translate their request into an
 * {@link IdempotentRequest}, call {@link Idempotency.handle} with the scope and a {@link RunHandler},
 * and send the {@link HandleResult}'s response. Make one with {@link createIdempotency}.
 *
 * The seam, for binding authors:
 * 1. read the whole request body, then call `handle(request, scope, run, route)`; `scope` is what
 *    the user's scope function returned for this request (it must include the principal);
 * 2. `run(ctx)` is called at most once, only for a new key (or a lease taken over after a crash),
 *    inside the key's transaction: run the user's handler with `ctx`, buffer its whole response
 *    and resolve with it ({@link HttpResponseData}); reject if the handler threw. Never write to
 *    the client from `run`: nothing is committed yet;
 * 3. when `handle` resolves the transaction has committed (or rolled back): send
 *    `result.response` as it is (status, header pairs, body bytes), adding `Date` and
 *    `Content-Length` as the server does. `handle` never rejects for a request's sake; a client
 *    that went away changes nothing (do not abort `handle` on disconnect).
 */
export class Idempotency {
  /** The options as resolved at construction, every default filled in. */
  readonly options: ResolvedIdempotencyOptions;
  readonly #inbox: Inbox<StoredHttpResponse>;
  /** Over one `pool`: where every request runs. */
  readonly #home: Place | undefined;
  /** With `databases`: where the requests routed to each database run, by name. */
  readonly #places: ReadonlyMap<string, Place> | undefined;
  /**
   * With `databases`: the database each keyed request's envelope was placed in by the user's
   * `route`, which core's router (the inbox's `route`) reads back, so that core's check (one key,
   * one database) sees the request's answer. Weak: an envelope is forgotten with its request.
   */
  readonly #placed = new WeakMap<Envelope, string>();
  readonly #log: Logger | undefined;

  constructor(options: ResolvedIdempotencyOptions) {
    this.options = options;
    this.#log = options.logger === false ? undefined : (options.logger ?? consoleWarn);
    const databases = options.databases;
    this.#inbox = createHttpInbox({
      ...(databases
        ? {
            databases: Object.fromEntries(databases),
            // The database was chosen from the request (#place) before the envelope was made.
            route: (envelope: Envelope) => {
              const name = this.#placed.get(envelope);
              if (name === undefined) throw new Error('@once/http: a request reached the inbox unplaced');
              return name;
            },
          }
        : { pool: options.pool }),
      consumer: options.consumer,
      schema: options.schema,
      mode: options.mode,
      outbox: options.outbox,
      retentionMs: options.retentionMs,
      lockTimeoutMs: options.lockTimeoutMs,
      handlerTimeoutMs: options.handlerTimeoutMs,
      // A request is never recorded failed: whatever the handler threw (a PermanentError, a
      // lease-mode step mistake, its deadline), nothing is kept and the client's retry runs again.
      recordFailed: false,
      conflictPolicy: 'reject',
      // 422s and 409s are the client's business: the engine logs only handler failures.
      logger: options.logger === undefined ? false : options.logger,
      // Every request brings its job as the call's handler (`process(envelope, { handler })`).
      handler: () => {
        throw new Error('@once/http: a request reached the inbox without its job');
      },
    });
    const o = this.#inbox.options;
    if (databases && o.routing) {
      const places = new Map<string, Place>();
      for (const [name, bounded] of o.routing.pools) {
        // Core's inbox of that database, minus the claim: its bounded pool, its outbox's wake.
        const own = databaseOptions(o, bounded);
        places.set(name, { database: name, pool: databases.get(name)!, unclaimed: new UnclaimedTx(own) });
      }
      this.#places = places;
      this.#home = undefined;
    } else {
      this.#places = undefined;
      this.#home = { database: undefined, pool: options.pool!, unclaimed: new UnclaimedTx(o) };
    }
  }

  /** The inbox behind the keys (for events: `inbox.on('message:processed', ...)`, and `@once/otel`). */
  get inbox(): Inbox<unknown> {
    return this.#inbox;
  }

  /**
   * Runs one request on an idempotent route: parses its key, claims it in PostgreSQL, runs `run`
   * for a new key and commits its writes, outbox rows and response together, or answers from what
   * is stored. Resolves with the response to send, after COMMIT. Never rejects for a request's sake.
   */
  async handle(
    request: IdempotentRequest,
    scope: string,
    run: RunHandler,
    route: RouteOptions = {},
  ): Promise<HandleResult> {
    const result = await this.#handle(request, scope, run, route);
    // The answers once writes itself, in the user's format (formatProblem); the handler's own as they are.
    const response = formatProblem(result.response, this.options.formatProblem, (err) =>
      this.#log?.warn({ consumer: this.options.consumer, err }, 'formatProblem threw; answered problem+json'),
    );
    return response === result.response ? result : { ...result, response };
  }

  async #handle(
    request: IdempotentRequest,
    scope: string,
    run: RunHandler,
    route: RouteOptions,
  ): Promise<HandleResult> {
    const o = this.options;
    const header = request.headers['idempotency-key'];
    const required = route.required ?? o.required;
    if (header === undefined) {
      if (required) {
        return {
          status: 'missing-key',
          response: problemResponse(
            400,
            HttpProblem.KeyMissing,
            'this route needs an Idempotency-Key header',
          ),
        };
      }
      const place = this.#place(request, undefined);
      if ('response' in place) return place;
      return runUnkeyed(place.unclaimed, o, request, scope, run, this.#log);
    }
    const parsed = parseIdempotencyKey(header, o.maxKeyLength);
    if (!parsed.ok) {
      return { status: 'invalid-key', response: problemResponse(400, HttpProblem.KeyInvalid, parsed.detail) };
    }
    const key = parsed.key;
    const bad = scopeProblem(scope);
    if (bad) return this.#failed(key, new Error(bad));
    const headers = route.fingerprintHeaders ?? o.fingerprintHeaders;
    let fingerprinted: Buffer;
    try {
      if (route.fingerprintHeaders) checkHeaderNames('fingerprintHeaders', headers);
      fingerprinted = fingerprintInput(request, headers);
    } catch (err) {
      return this.#failed(key, err);
    }
    const place = this.#place(request, key);
    if ('response' in place) return place;
    const envelope: Envelope = {
      id: messageIdOf(scope, key),
      body: fingerprinted,
      headers: {},
      // The route's name, else its path: never the query, which may carry what logs must not.
      source: { broker: 'http', queue: request.route ?? (request.target.split('?')[0] as string) },
      attempt: 1,
      redelivered: false,
    };
    if (place.database !== undefined) this.#placed.set(envelope, place.database);
    const job: Job = { run, key, scope, place };
    // The job goes with the call, as its handler: nothing is kept by envelope.
    const call: ProcessOptions<StoredHttpResponse> = {
      handler: (_envelope, ctx) => this.#runJob(job, ctx),
    };
    let answer = answerOf(await this.#inbox.process(envelope, call));
    if (answer.kind === 'mismatch') {
      // Maybe a key a build of fingerprint version 1 stored for this very request (docs/http.md,
      // "Upgrades"): then processed again under that build's fingerprint, so the inbox decides as
      // it did then (a replay, a 409 while a lease is held, a takeover); else the 422 stands.
      let legacy: Buffer | undefined;
      try {
        legacy = await legacyInputOf(
          place.pool,
          o.schema,
          o.consumer,
          messageIdOf(scope, key),
          request,
          headers,
        );
      } catch (err) {
        return this.#failed(key, err);
      }
      if (legacy !== undefined) {
        const again: Envelope = { ...envelope, body: legacy };
        if (place.database !== undefined) this.#placed.set(again, place.database);
        answer = answerOf(await this.#inbox.process(again, call));
      }
    }
    return this.#answer(answer, job);
  }

  async #answer(answer: KeyAnswer, job: Job): Promise<HandleResult> {
    const key = job.key;
    switch (answer.kind) {
      case 'processed':
        return { status: 'processed', key, response: job.answered! };
      case 'replay':
        // Lease mode's duplicates come without the response: read it.
        return answer.stored
          ? this.#replayOf(answer.stored, key)
          : this.#replay(job.place.pool, answer.id, key);
      case 'mismatch':
        return {
          status: 'mismatch',
          key,
          response: problemResponse(
            422,
            HttpProblem.KeyMismatch,
            'this Idempotency-Key was used with another request (method, route, headers or body); use a new key for a new request',
          ),
        };
      case 'in-flight':
        return {
          status: 'in-flight',
          key,
          response: problemResponse(
            409,
            HttpProblem.KeyInFlight,
            'a request with this Idempotency-Key is still being processed; retry after Retry-After seconds',
            [['retry-after', String(answer.retryAfterS)]],
          ),
        };
      case 'failed':
        if (job.unstored) return { status: 'not-stored', key, response: job.unstored };
        return this.#failed(key, answer.error);
      case 'unroutable':
        return this.#unroutable(
          key,
          answer.error,
          'route() placed this Idempotency-Key in another database than before, and a key must stay in one database',
        );
      case 'unavailable':
        return {
          status: 'failed',
          key,
          error: answer.error,
          response: problemResponse(503, HttpProblem.Unavailable, answer.error.message, [
            ['retry-after', String(answer.retryAfterS)],
          ]),
        };
    }
  }

  async #replay(pool: PgPoolLike, id: string, key: string): Promise<HandleResult> {
    let row: StoredHttpRow;
    try {
      row = await readStoredResponse(pool, this.options.schema, this.options.consumer, id);
    } catch (err) {
      return this.#failed(key, err);
    }
    if (row.state !== 'response') {
      // Purged between the claim and this read, or a row some non-HTTP consumer of the same name wrote.
      return this.#failed(key, new Error(`key ${id} has no stored response (${row.state})`));
    }
    return this.#replayOf(row.response, key);
  }

  #replayOf(r: StoredHttpResponse, key: string): HandleResult {
    return {
      status: 'replayed',
      key,
      response: replayOf({ status: r.status, headers: r.headers, body: r.body }, this.options.replayHeader),
    };
  }

  /**
   * The database `request` runs in: the one `pool`, or the one the user's `route` names. A router
   * that throws or names no database of the set answers 500 `unroutable` (a bug of the router or
   * of the set, which the same request would meet again; 503 is kept for a database that is
   * down), with the router's message and nothing else of the set in `detail`, and nothing recorded.
   */
  #place(request: IdempotentRequest, key: string | undefined): Place | HandleResult {
    if (this.#home) return this.#home;
    const places = this.#places!;
    let name: unknown;
    try {
      name = this.options.route!(request);
    } catch (err) {
      const message = serializeError(err).message;
      return this.#unroutable(
        key,
        new UnroutableError(`route() threw for a request: ${message}`, undefined, { cause: err }),
        `route() threw: ${message}`,
      );
    }
    const place = typeof name === 'string' ? places.get(name) : undefined;
    if (place) return place;
    // A name is at most 63 characters: a longer answer is shown cut, not echoed whole.
    const given =
      typeof name === 'string'
        ? JSON.stringify(name.length > 64 ? `${name.slice(0, 63)}…` : name)
        : describeValue(name);
    return this.#unroutable(
      key,
      new UnroutableError(
        `route() gave ${given} for a request, which is not one of the databases (${[...places.keys()].join(', ')})`,
        typeof name === 'string' ? name : undefined,
      ),
      `route() gave ${given}, which names no database`,
    );
  }

  /** 500 `unroutable`: the request has no database, so it ran nowhere and nothing was recorded. */
  #unroutable(key: string | undefined, error: unknown, cause: string): HandleResult {
    this.#log?.warn(
      { consumer: this.options.consumer, key, err: error },
      'request could not be placed in a database; nothing ran and nothing was recorded',
    );
    return {
      status: 'failed',
      key,
      error,
      response: problemResponse(
        500,
        HttpProblem.Unroutable,
        `the request could not be placed in a database: ${cause}; nothing ran and nothing was recorded`,
      ),
    };
  }

  #failed(key: string | undefined, error: unknown): HandleResult {
    this.#log?.warn(
      { consumer: this.options.consumer, key, err: error },
      'idempotent request failed; nothing was stored, a retry with the same key runs it again',
    );
    return {
      status: 'failed',
      key,
      error,
      response: problemResponse(
        500,
        HttpProblem.HandlerFailed,
        'the request failed and nothing was recorded; retry with the same Idempotency-Key',
      ),
    };
  }

  /**
   * The inbox's handler: runs the route in the key's transaction and hands core what to store with
   * the key (core sends it with COMMIT). A 4xx is stored with the handler's writes undone, to the
   * savepoint taken with the claim; a status that is never stored rolls everything back.
   */
  async #runJob(job: Job, ctx: HandlerContext): Promise<HttpResponseToStore> {
    const hctx: IdempotentContext = {
      tx: ctx.tx,
      publish: ctx.publish,
      step: (name, fn) => ctx.step(name, fn),
      idempotencyKey: (step) => ctx.idempotencyKey(step),
      key: job.key,
      scope: job.scope,
      attempt: ctx.attempt,
      // Read through: core makes the AbortController only when the handler asks for it.
      get signal() {
        return ctx.signal;
      },
    };
    const answered = await job.run(hctx);
    const bad = checkResponse(answered);
    if (bad) throw new TypeError(bad);
    if (!isStorable(answered.status)) {
      job.unstored = answered;
      throw new NotStored(`status ${answered.status} is not stored`);
    }
    job.answered = answered;
    return {
      status: answered.status,
      headers: storableHeaders(answered.headers),
      body: Buffer.from(answered.body.buffer, answered.body.byteOffset, answered.body.byteLength),
      undoWrites: answered.status >= 400,
    };
  }
}

function describeValue(value: unknown): string {
  return value === null ? 'null' : value === undefined ? 'undefined' : `a ${typeof value}`;
}

const consoleWarn: Logger = {
  ...silentLogger,
  warn: (fields, message) => console.warn(message, fields),
};

/**
 * Makes the engine of idempotent routes; bindings take it (`idempotentFetch(engine, ...)`). Over
 * one `pool`, or over several databases with `databases` and `route`: then each request runs in
 * the database `route` names for it (docs/http.md, "Several databases").
 */
export function createIdempotency(options: IdempotencyOptions): Idempotency {
  return new Idempotency(resolveIdempotencyOptions(options));
}
