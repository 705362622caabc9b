import { DeadlineError, PermanentError } from '../errors.js';
import type { FailReason } from '../message/outcome.js';
import { classifyDbError, isEnvironmental } from '../pg/sqlstate.js';
import type { IsolationLevel } from '../sql/isolation.js';

/**
 * What a failure of a started message comes to. This module owns that one decision for every
 * path (single, batch, lease): whether the attempt counts, and whether it ends the message.
 * - `retry`: redeliver; `spent` says whether the attempt counts toward `maxAttempts`.
 * - `fail`: record it failed and dead-letter it.
 * - `busy`: a rival holds the id past the wait bound.
 * - `unavailable`: once's schema is not there; a setup fault, never the message's.
 */
export type Verdict =
  | { kind: 'retry'; spent: boolean }
  | { kind: 'fail'; reason: Extract<FailReason, 'permanent' | 'max-attempts'> }
  | { kind: 'busy' }
  | { kind: 'unavailable' };

/** What the verdict depends on besides the error. */
export interface VerdictContext {
  /** The attempt that just failed (1 for a first delivery). */
  attempt: number;
  maxAttempts: number;
  /**
   * The message was refused before its handler ran: started more than `maxAttempts` times
   * (engine/start-budget.ts). @default false
   */
  refused?: boolean;
  /** The user's classifier, already guarded against throwing. */
  classify: (error: unknown) => 'transient' | 'permanent';
  isolation: IsolationLevel;
}

/**
 * Decides what `error` means for the message. `where` is `handler` when the handler threw, and
 * `statement` when one of once's own statements failed (the claim, a stored result, COMMIT).
 *
 * Faults of the environment (see {@link isEnvironmental}) never count and never end a message, so
 * a database outage dead-letters nothing. Everything else is the message's own failure, from the
 * handler or from what the handler left in the transaction (a deferred constraint failing at
 * COMMIT, a statement in a transaction the handler let fail): it counts, and ends the message at
 * `maxAttempts` at the latest, so nothing retries forever. A handler past its deadline counts too.
 */
export function verdictOf(error: unknown, where: 'handler' | 'statement', c: VerdictContext): Verdict {
  // The engine counted the starts of a message that keeps killing its consumer.
  if (c.refused) return { kind: 'fail', reason: 'max-attempts' };
  if (error instanceof DeadlineError) {
    return c.attempt >= c.maxAttempts
      ? { kind: 'fail', reason: 'max-attempts' }
      : { kind: 'retry', spent: true };
  }
  const db = classifyDbError(error);
  if (where === 'statement') {
    // Our own table is missing: once's schema is not installed (or was dropped). From a handler,
    // a missing table is the handler's own bug, and counts like any other failure.
    if (db === 'schema-missing') return { kind: 'unavailable' };
    // Our claim waited past lock_timeout, or lost a race under a stricter isolation level: a
    // rival holds the id.
    if (db === 'busy') return { kind: 'busy' };
    if (db === 'conflict-retry' && c.isolation !== 'read committed') return { kind: 'busy' };
  }
  if (isEnvironmental(db) && db !== 'schema-missing') return { kind: 'retry', spent: false };
  if (PermanentError.is(error) || c.classify(error) === 'permanent')
    return { kind: 'fail', reason: 'permanent' };
  if (c.attempt >= c.maxAttempts) return { kind: 'fail', reason: 'max-attempts' };
  return { kind: 'retry', spent: true };
}

/**
 * The verdict is the environment's, not the message's: once's schema is missing, or a fault of the
 * environment that spends nothing (a lost connection, a timeout, a lost race under READ
 * COMMITTED). A statement of once's own that failed so before any handler started makes the
 * consumer hold (an `unavailable` outcome): the engine's claim, and the adapters' statements that
 * run outside any message's transaction (`outsideMessage`).
 */
export function isEnvironmentVerdict(v: Verdict): boolean {
  return v.kind === 'unavailable' || (v.kind === 'retry' && !v.spent);
}

/**
 * The verdict of a statement of once's own that ran outside any message's transaction, before the
 * messages it guards (a replay marker noted in PostgreSQL): no attempt is at stake, and no
 * transaction of a message set its isolation level.
 */
export function outsideMessage(error: unknown): Verdict {
  return verdictOf(error, 'statement', OUTSIDE_MESSAGE);
}

const OUTSIDE_MESSAGE: VerdictContext = {
  attempt: 0,
  maxAttempts: 1,
  classify: () => 'transient',
  isolation: 'read committed',
};
