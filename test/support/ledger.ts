import { type QueryableLike, quoteIdent } from './isolation.js';

// The ledger is how every integration test observes "effects = 1 per message id". A handler under
// test records its effect with `record(client, ...)` on the client of its own transaction, so the
// row commits or rolls back with the work; the table deliberately has no unique key on
// message_id, so a second effect for one id is stored and counted instead of being prevented.

/** One effect as a handler records it. */
export interface LedgerEffect {
  readonly messageId: string;
  /** Ordering key (Kafka key, SQS group, ...); order is checked within a key. */
  readonly key: string;
  readonly payload: string;
}

/** What {@link Ledger.check} and {@link checkEffects} are asked. */
export interface LedgerCheckOptions {
  /** Every id that was sent and acknowledged, in send order (send order matters for the order check). */
  readonly expectedIds: readonly string[];
  /** Also require that, within each key, first effects follow `expectedIds` order. @default false */
  readonly checkOrderPerKey?: boolean;
}

/** Within one key, first effects out of send order. */
export interface OrderViolation {
  readonly key: string;
  /** The key's ids in send order (lost ids left out). */
  readonly expected: readonly string[];
  /** The same ids in the order their first effects were recorded. */
  readonly actual: readonly string[];
  /** First position where the two differ. */
  readonly firstMismatchAt: number;
}

/** The verdict; `ok` only when nothing is lost, duplicated, unexpected or (if checked) out of order. */
export interface LedgerCheck {
  readonly ok: boolean;
  /** Expected ids with no effect. */
  readonly lost: readonly string[];
  /** Ids with more than one effect, and how many. */
  readonly duplicated: readonly { readonly id: string; readonly count: number }[];
  /** Ids with effects that were never expected (a test bug or a corrupted id). */
  readonly unexpected: readonly string[];
  readonly orderViolations: readonly OrderViolation[];
  /** Effects recorded in all. */
  readonly total: number;
}

/**
 * Pure verdict over effects listed in recording order (`seq`). Ordering uses recording order,
 * which is processing order within a key: a consumer that keeps a key's messages in order starts
 * the next one only after the previous one committed.
 */
export function checkEffects(
  effects: readonly Pick<LedgerEffect, 'messageId' | 'key'>[],
  opts: LedgerCheckOptions,
): LedgerCheck {
  const expected = new Set(opts.expectedIds);
  const counts = new Map<string, number>();
  const firstsByKey = new Map<string, string[]>();
  const keyOf = new Map<string, string>();
  for (const e of effects) {
    const n = (counts.get(e.messageId) ?? 0) + 1;
    counts.set(e.messageId, n);
    if (n > 1) continue;
    keyOf.set(e.messageId, e.key);
    const firsts = firstsByKey.get(e.key) ?? [];
    firsts.push(e.messageId);
    firstsByKey.set(e.key, firsts);
  }
  const lost = [...expected].filter((id) => !counts.has(id));
  const duplicated = [...counts].filter(([, count]) => count > 1).map(([id, count]) => ({ id, count }));
  const unexpected = [...counts.keys()].filter((id) => !expected.has(id));
  const orderViolations: OrderViolation[] = [];
  if (opts.checkOrderPerKey) {
    for (const [key, firsts] of firstsByKey) {
      const want = [...expected].filter((id) => keyOf.get(id) === key);
      const got = firsts.filter((id) => expected.has(id));
      const at = want.findIndex((id, i) => got[i] !== id);
      if (at >= 0) orderViolations.push({ key, expected: want, actual: got, firstMismatchAt: at });
    }
  }
  const ok = !lost.length && !duplicated.length && !unexpected.length && !orderViolations.length;
  return { ok, lost, duplicated, unexpected, orderViolations, total: effects.length };
}

/** An effects table in a test's schema; see {@link createLedger}. */
export class Ledger {
  /** The schema-qualified, quoted table name. */
  readonly table: string;
  readonly #pool: QueryableLike;

  constructor(pool: QueryableLike, schema: string) {
    this.#pool = pool;
    this.table = `${quoteIdent(schema)}.effects`;
  }

  /** Appends one effect; pass the client of the handler's transaction so it commits with the work. */
  async record(client: QueryableLike, effect: LedgerEffect): Promise<void> {
    await client.query(`INSERT INTO ${this.table} (message_id, key, payload) VALUES ($1, $2, $3)`, [
      effect.messageId,
      effect.key,
      effect.payload,
    ]);
  }

  /** Every committed effect in recording order. */
  async effects(): Promise<(LedgerEffect & { readonly seq: string; readonly at: Date })[]> {
    const { rows } = await this.#pool.query(
      `SELECT seq, message_id AS "messageId", key, payload, at FROM ${this.table} ORDER BY seq`,
    );
    return rows as (LedgerEffect & { seq: string; at: Date })[];
  }

  /** Reads the committed effects and judges them; see {@link checkEffects}. */
  async check(opts: LedgerCheckOptions): Promise<LedgerCheck> {
    return checkEffects(await this.effects(), opts);
  }
}

/**
 * Creates (if absent) the schema and its append-only `effects` table and returns the ledger.
 * `seq` is the primary key only so rows have an order; message_id is deliberately not unique.
 */
export async function createLedger(pool: QueryableLike, schema: string): Promise<Ledger> {
  const ledger = new Ledger(pool, schema);
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
  await pool.query(`CREATE TABLE IF NOT EXISTS ${ledger.table} (
    seq bigserial PRIMARY KEY,
    message_id text NOT NULL,
    key text NOT NULL,
    payload text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
  )`);
  return ledger;
}
