/**
 * @once/core/testing: check a real handler against a real database for the cases that repeat
 * effects in production. Each scenario uses your inbox's options (pool, schema, consumer,
 * handler) and your own way of counting the handler's effects.
 *
 * ```ts
 * const report = await checkEffectsOnce(inbox, makeEnvelope({ id: 'order-1', body: '{"amount":5}' }), {
 *   countEffects: async (id) => (await pool.query('SELECT count(*) FROM charges WHERE order_id = $1', [id])).rows[0].count,
 * });
 * expect(report.violations).toEqual([]);
 * ```
 */

import { createInbox, type Inbox } from '../inbox.js';
import type { Envelope } from '../message/envelope.js';
import type { Outcome } from '../message/outcome.js';

/** Builds an envelope for tests; `body` may be a string or an object (JSON-encoded). */
export function makeEnvelope(
  patch: Partial<Omit<Envelope, 'body'>> & {
    /**
     * The body: bytes as they are, a string as UTF-8, any other object JSON-encoded. @default an empty JSON
     * object
     */
    body?: Buffer | string | object;
  } = {},
): Envelope {
  const { body, ...rest } = patch;
  const bytes = Buffer.isBuffer(body)
    ? body
    : typeof body === 'string'
      ? Buffer.from(body)
      : Buffer.from(JSON.stringify(body ?? {}));
  return {
    id: `test-${Math.random().toString(36).slice(2)}`,
    headers: {},
    source: { broker: 'test', queue: 'test' },
    attempt: 1,
    redelivered: false,
    ...rest,
    body: bytes,
  };
}

/** Delivers the same envelope `times` times at once, as a duplicate storm would. */
export async function deliverConcurrently<R>(
  inbox: Inbox<R>,
  envelope: Envelope,
  times = 10,
): Promise<Outcome<R>[]> {
  return Promise.all(Array.from({ length: times }, () => inbox.process({ ...envelope })));
}

/**
 * Runs the handler, then fails the transaction after the handler's writes (as a crash or a
 * lost connection before COMMIT would), then redelivers. Returns both outcomes.
 */
export async function redeliverAfterFailure<R>(
  inbox: Inbox<R>,
  envelope: Envelope,
): Promise<[Outcome<R>, Outcome<R>]> {
  const failing = createInbox<R>({
    ...inbox.options,
    handler: async (e, ctx) => {
      await inbox.options.handler(e, ctx);
      throw new Error('once testing: simulated failure after the handler, before COMMIT');
    },
  });
  const first = await failing.process(envelope);
  const second = await inbox.process({ ...envelope, attempt: envelope.attempt + 1, redelivered: true });
  return [first, second];
}

/**
 * Processes the envelope and then drops the outcome, as a consumer that crashed between COMMIT
 * and the broker ack would, then redelivers it. The second outcome must be `duplicate`.
 */
export async function crashBetweenCommitAndAck<R>(
  inbox: Inbox<R>,
  envelope: Envelope,
): Promise<[Outcome<R>, Outcome<R>]> {
  const first = await inbox.process(envelope);
  const second = await inbox.process({ ...envelope, attempt: envelope.attempt + 1, redelivered: true });
  return [first, second];
}

/** Options of {@link checkEffectsOnce}. */
export interface CheckEffectsOnceOptions {
  /** Counts the handler's effects for a message id in your database. */
  countEffects: (id: string) => Promise<number | string>;
  /** Copies delivered at once in the storm scenario. @default 10 */
  copies?: number;
}

/** What {@link checkEffectsOnce} found: an empty `violations` list means effects happened once. */
export interface EffectsOnceReport {
  /** Each scenario run: its id, how many effects it left, and the outcomes it saw. */
  scenarios: {
    /** The scenario's name: `storm`, `failure-then-redelivery` or `crash-between-commit-and-ack`. */
    name: string;
    /** The message id the scenario delivered. */
    id: string;
    /** How many effects the handler left for that id: 1 when it happened once. */
    effects: number;
    /** The status of each outcome the inbox returned, in order. */
    outcomes: string[];
  }[];
  /** What went wrong: an effect missing or repeated; empty when effects happened once. */
  violations: string[];
}

/**
 * Runs three scenarios with fresh ids derived from the envelope's id (storm, failure then
 * redelivery, crash between commit and ack) and checks that each id has exactly one effect.
 */
export async function checkEffectsOnce<R>(
  inbox: Inbox<R>,
  envelope: Envelope,
  options: CheckEffectsOnceOptions,
): Promise<EffectsOnceReport> {
  const base = envelope.id ?? 'test';
  const run = async (name: string, fn: (e: Envelope) => Promise<Outcome<R>[]>) => {
    const id = `${base}~${name}~${Math.random().toString(36).slice(2, 8)}`;
    const e = { ...envelope, id };
    const idOf = inbox.options.idOf;
    const key = idOf ? idOf(e) : id;
    const outcomes = await fn(e);
    const effects = Number(await options.countEffects(key ?? id));
    return { name, id: key ?? id, effects, outcomes: outcomes.map((o) => o.status) };
  };
  const scenarios = [
    await run('storm', (e) => deliverConcurrently(inbox, e, options.copies ?? 10)),
    await run('failure-then-redelivery', (e) => redeliverAfterFailure(inbox, e)),
    await run('crash-between-commit-and-ack', (e) => crashBetweenCommitAndAck(inbox, e)),
  ];
  const violations = scenarios
    .filter((s) => s.effects !== 1)
    .map((s) => `${s.name}: ${s.effects} effects for ${s.id} (outcomes: ${s.outcomes.join(', ')})`);
  return { scenarios, violations };
}
