import { randomUUID } from 'node:crypto';
import type { EngineContext } from '../engine/context.js';
import { type HttpResponseToStore, httpResponseProblem } from '../engine/http-response-store.js';
import type { Item } from '../engine/item.js';
import type { ResolvedInboxOptions, ResolvedLease } from '../engine/options.js';
import type { Outcomes } from '../engine/outcomes.js';
import { type FailureWrite, recordFailed } from '../engine/record-failure.js';
import { handlerOf } from '../engine/start-budget.js';
import { DeadlineError, ErrorCode, OnceError, serializeError } from '../errors.js';
import { verdictOf } from '../handler/verdict.js';
import type { Events } from '../message/events.js';
import type { FailReason, Outcome } from '../message/outcome.js';
import type { Connection } from '../pg/connection.js';
import { rollback, rolledBackError } from '../pg/transaction.js';
import { type HttpSql, httpSql } from '../sql/http.js';
import { type LeaseSql, leaseSql } from '../sql/lease.js';
import { type Claimed, LeaseClaim } from './lease-claim.js';
import { LeaseClock } from './lease-clock.js';
import { isLeaseLost, isPermanentLeaseError, leaseLost } from './lease-errors.js';
import { LeaseTx } from './lease-tx.js';
import { type LeaseRun, runLeaseHandler } from './run-lease-handler.js';
import { type StepStore, Steps } from './steps.js';

/**
 * Lease mode's executor: the id is claimed with a lease in a short transaction, the handler runs
 * outside any transaction (its external effects are durable steps), and `done` is written at the
 * end, fenced by the lease owner, in the handler's `ctx.tx` transaction when it used one.
 *
 * It runs one item the engine prepared and planned (engine/item.ts, engine/plan-runs.ts: every
 * message alone, stopping on `retry`, `busy` and `not-run`), and records a failure through
 * engine/record-failure.ts with its write fenced by the lease. It owns only the claim, the lease
 * and the steps.
 */
export class LeaseProcessor<R = unknown> {
  readonly #ctx: EngineContext<R>;
  readonly #o: ResolvedInboxOptions<R>;
  /** `mode.lease`, after defaults. */
  readonly #lease: ResolvedLease;
  readonly #sql: LeaseSql;
  readonly #claim: LeaseClaim<R>;
  readonly #txBegin: string;
  /** Set for an inbox of `createHttpInbox`: `done` stores the handler's response. */
  readonly #http: HttpSql | undefined;
  readonly #out: Outcomes<R>;
  readonly #events: Events;

  constructor(ctx: EngineContext<R>, lease: ResolvedLease) {
    const options = ctx.o;
    this.#ctx = ctx;
    this.#o = options;
    this.#lease = lease;
    this.#events = ctx.events;
    this.#sql = leaseSql(options.quotedSchema);
    // An HTTP key's ctx.tx opens with the savepoint a stored 4xx rolls its writes back to.
    const begin = this.#sql.begin(options.isolation, options.lockTimeoutMs);
    this.#http = options.httpResponses ? httpSql(options.quotedSchema) : undefined;
    this.#txBegin = this.#http ? `${begin}; ${this.#http.savepoint}` : begin;
    this.#out = ctx.out;
    this.#claim = new LeaseClaim(options, lease.leaseMs, this.#sql, this.#out, ctx.events);
  }

  /** Runs one message under a lease. Never throws for a message's sake. */
  async one(item: Item): Promise<Outcome<R>> {
    const owner = `${this.#lease.workerId}/${randomUUID()}`;
    const claim = await this.#claim.take(item, owner);
    if (!('owner' in claim)) return claim;
    // With recordFailed off nothing is given up on for good, so the claim count ends nothing
    // either: the redelivery runs (see InboxOptions.recordFailed).
    if (claim.attempt > this.#o.maxAttempts && this.#o.recordFailed) {
      // Claimed maxAttempts times without an outcome: the handler crashed the process, ran out of
      // time or lost its lease every time. Running it again would not end differently.
      const error = new Error(
        `claimed ${claim.attempt} times without finishing (crashed, timed out or lost its lease each time)`,
      );
      return this.#recordFailed(claim, 'max-attempts', error);
    }
    const o = this.#o;
    const abort = new AbortController();
    const tx = new LeaseTx(o.pool, this.#txBegin);
    const recorded = claim.recorded;
    let steps: Steps | undefined;
    const clock = new LeaseClock({
      pool: o.pool,
      sql: this.#sql,
      consumer: o.consumer,
      id: item.id,
      owner,
      leaseMs: this.#lease.leaseMs,
      heartbeatMs: this.#lease.heartbeatMs,
      liveness: item.envelope.liveness,
      logger: o.logger,
      onLost: (err) => {
        steps?.close(err);
        abort.abort(err);
      },
    });
    steps = new Steps({
      store: this.#store(claim, clock),
      recorded,
      consumer: o.consumer,
      id: item.id,
      signal: abort.signal,
    });
    clock.start(claim.sentAt);
    let run: LeaseRun<R>;
    const started = performance.now();
    try {
      run = await runLeaseHandler(
        {
          handler: handlerOf(this.#ctx, item),
          consumer: o.consumer,
          id: item.id,
          attempt: claim.attempt,
          timeoutMs: o.handlerTimeoutMs,
          storeResult: o.storeResult,
          tx,
          steps,
          abort,
          outbox: o.outbox,
        },
        item.envelope,
      );
    } finally {
      clock.stop();
    }
    if (this.#events.has('handler:settled')) {
      this.#events.emit('handler:settled', {
        consumer: o.consumer,
        id: item.id,
        source: item.envelope.source,
        durationMs: performance.now() - started,
        error: run.ok ? undefined : serializeError(run.error),
      });
    }
    const conn = await tx.settled();
    if (!run.ok) {
      if (conn) await rollback(conn, run.error);
      return this.#afterError(claim, run.error, clock.lost);
    }
    return this.#finish(claim, run, conn);
  }

  /** The steps' store: fenced writes through the pool, each one renewing the lease. */
  #store(c: Claimed, clock: LeaseClock): StepStore {
    const { pool, consumer } = this.#o;
    const { leaseMs } = this.#lease;
    return {
      renew: () => clock.renew(),
      record: async (step, seq, json) => {
        const sentAt = performance.now();
        const res = await pool.query<{ owned: number; recorded: number }>(this.#sql.recordStep, [
          consumer,
          c.item.id,
          c.owner,
          leaseMs,
          step,
          seq,
          c.attempt,
          json,
        ]);
        const row = res.rows[0];
        if (!row || row.owned === 0) {
          const err = leaseLost(
            consumer,
            c.item.id,
            `another worker took the message over before step '${step}' was recorded`,
          );
          clock.lose(err);
          throw err;
        }
        clock.confirmed(sentAt);
        if (row.recorded === 0) {
          throw new OnceError(
            ErrorCode.Database,
            `step '${step}' of ${consumer}/${c.item.id} was already recorded; the next attempt uses the recorded result`,
            { retryable: true },
          );
        }
      },
    };
  }

  /** Writes `done`, fenced: in the handler's transaction (committing its writes) or on its own. */
  async #finish(
    c: Claimed,
    run: LeaseRun<R> & { ok: true },
    conn: Connection | undefined,
  ): Promise<Outcome<R>> {
    const o = this.#o;
    // run.json is already in the storage form (toJsonb, in run-handler.ts).
    const params: unknown[] = [o.consumer, c.item.id, c.owner, run.json, o.retentionMs];
    let doneSql: string = this.#sql.done;
    let undo = false;
    if (this.#http) {
      const response = run.result as unknown as HttpResponseToStore;
      const bad = httpResponseProblem(response);
      if (bad) {
        if (conn) await rollback(conn, undefined);
        return this.#afterError(c, new TypeError(bad), undefined);
      }
      params.push(response.status, JSON.stringify(response.headers), response.body);
      doneSql = this.#sql.doneWithResponse;
      undo = response.undoWrites;
    }
    if (conn) {
      try {
        if (undo) await conn.client.query(this.#http!.rollbackToSavepoint);
        const done = await conn.client.query(doneSql, params);
        if (done.rowCount === 0) {
          await rollback(conn, undefined);
          return this.#out.busy(c.item.envelope, c.item.id, o.busyDelayMs);
        }
        const commit = await conn.client.query('COMMIT');
        conn.release();
        if (commit.command === 'ROLLBACK') return this.#afterError(c, rolledBackError(), undefined);
      } catch (err) {
        // The handler's transaction failed (a statement error it swallowed, a dropped connection,
        // a COMMIT whose outcome is unknown): the claim on redelivery sorts it out.
        await rollback(conn, err);
        return this.#afterError(c, err, undefined);
      }
    } else {
      try {
        const done = await o.pool.query(doneSql, params);
        if (done.rowCount === 0) return this.#out.busy(c.item.envelope, c.item.id, o.busyDelayMs);
      } catch (err) {
        return this.#afterError(c, err, undefined);
      }
    }
    if (run.published && !undo) o.outbox?.wake();
    return { status: 'processed', id: c.item.id, envelope: c.item.envelope, result: run.result };
  }

  /** The handler (or the final write) failed: give the id back and retry, or record it failed. */
  async #afterError(c: Claimed, error: unknown, lost: OnceError | undefined): Promise<Outcome<R>> {
    const o = this.#o;
    const { envelope, id } = c.item;
    if (lost || isLeaseLost(error)) {
      // If the loss was only feared (renewals failing), give the id back so a redelivery need not
      // wait for the lease to run out; the release is fenced, so it cannot touch a new owner's row.
      await this.#release(c);
      return this.#out.busy(envelope, id, o.busyDelayMs);
    }
    const verdict = verdictOf(error, 'handler', {
      attempt: c.attempt,
      maxAttempts: o.maxAttempts,
      classify: (e) => (isPermanentLeaseError(e) ? 'permanent' : this.#out.classify(e)),
      isolation: o.isolation,
      refused: c.item.starts?.refused !== undefined,
    });
    if (verdict.kind === 'fail' && o.recordFailed) return this.#recordFailed(c, verdict.reason, error);
    if (error instanceof DeadlineError) {
      // The abandoned handler may still be inside a step: keep the lease until it runs out, so a
      // step that completes late can still record its result (fenced) and no other worker runs
      // the same step meanwhile. A redelivery before then would only meet `busy`.
      if (verdict.kind === 'fail') return this.#out.failed(envelope, id, verdict.reason, error);
      const r = this.#out.retry(envelope, id, error, true);
      return { ...r, delayMs: Math.max(r.delayMs, this.#lease.leaseMs) };
    }
    await this.#release(c);
    // recordFailed off: given back, not written down; the redelivery takes it over and runs.
    if (verdict.kind === 'fail') return this.#out.failed(envelope, id, verdict.reason, error);
    // A fault of the environment is not the message's: it spends no attempt (the claim count still rises).
    return this.#out.retry(envelope, id, error, verdict.kind === 'retry' && verdict.spent);
  }

  /** Records the message failed the engine's way, the write fenced by the lease this claim holds. */
  #recordFailed(c: Claimed, reason: FailReason, error: unknown): Promise<Outcome<R>> {
    const { pool, consumer, retentionMs } = this.#o;
    const write: FailureWrite = (r) =>
      pool.query(this.#sql.fail, [
        consumer,
        c.item.id,
        c.owner,
        r.error,
        r.body,
        r.truncated,
        retentionMs,
        r.origin,
      ]);
    return recordFailed(this.#ctx, c.item, reason, error, write);
  }

  /** Gives the id back (fenced) so its redelivery claims it at once; best effort. */
  async #release(c: Claimed): Promise<void> {
    try {
      await this.#o.pool.query(this.#sql.release, [this.#o.consumer, c.item.id, c.owner]);
    } catch {
      // The lease runs out on its own.
    }
  }
}
