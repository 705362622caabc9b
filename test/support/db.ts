import { migrate } from '@once/core';
import type pg from 'pg';
import { createTestPool, dropSchema, freshSchemaName, type QueryableLike, quoteIdent } from './isolation.js';
import { checkEffects, createLedger, type Ledger, type LedgerCheck } from './ledger.js';

// The one database fixture of the integration tests: a test file's own migrated schema, an
// effects table in it that handlers write to in their own transaction, and ledgers on demand.

/** One row of {@link TestDb.effects}, in recording order. */
export interface EffectRow {
  readonly seq: string;
  readonly id: string;
  readonly key: string;
  readonly payload: string;
}

/** What {@link freshDb} returns. */
export interface TestDb {
  readonly pool: pg.Pool;
  /** The schema once's tables live in (from {@link freshSchemaName}). */
  readonly schema: string;
  /**
   * `<schema>.effects`, append-only: `seq`, `id`, `key` and `payload` (both `''` unless given),
   * `at`. No unique key on `id`, so a second effect for one id is stored and counted, not
   * prevented. Handlers insert with plain SQL (`INSERT INTO ${db.effects} (id) VALUES ($1)`) or
   * {@link TestDb.record}.
   */
  readonly effects: string;
  /** Records one effect on `tx`, the client of the handler's transaction. */
  record(tx: QueryableLike, id: string, key?: string, payload?: unknown): Promise<void>;
  /** Effects per id, for ids starting with `prefix`. */
  counts(prefix?: string): Promise<Map<string, number>>;
  /** Effects recorded in all. */
  total(): Promise<number>;
  /** Every effect, in recording order. */
  rows(): Promise<EffectRow[]>;
  /**
   * The ledger's verdict ({@link checkEffects}) over the effects whose ids share the expected
   * ids' common prefix: none lost, none twice, and (optionally) first effects in order per key.
   */
  check(expectedIds: readonly string[], checkOrderPerKey?: boolean): Promise<LedgerCheck>;
  /** A fresh, empty ledger in a schema of its own (named after `name`), dropped by `close`. */
  ledger(name?: string): Promise<Ledger>;
  /** Drops every schema made here (errors ignored: a test may have cut the connections) and ends the pool. */
  close(): Promise<void>;
}

/**
 * A fresh schema migrated by this tree's @once/core, with its effects table, on a pool of at
 * most `max` clients (`createTestPool`).
 */
export async function freshDb(prefix: string, max = 10): Promise<TestDb> {
  const pool = createTestPool({ max });
  const schema = freshSchemaName(prefix);
  const schemas = [schema];
  await migrate(pool, { schema });
  const effects = `${quoteIdent(schema)}.effects`;
  await pool.query(`CREATE TABLE ${effects} (
    seq bigserial PRIMARY KEY,
    id text NOT NULL,
    key text NOT NULL DEFAULT '',
    payload text NOT NULL DEFAULT '',
    at timestamptz NOT NULL DEFAULT clock_timestamp()
  )`);
  const rows = async () =>
    (await pool.query<EffectRow>(`SELECT seq, id, key, payload FROM ${effects} ORDER BY seq`)).rows;
  return {
    pool,
    schema,
    effects,
    async record(tx, id, key, payload) {
      await tx.query(`INSERT INTO ${effects} (id, key, payload) VALUES ($1, $2, $3)`, [
        id,
        key ?? '',
        String(payload ?? ''),
      ]);
    },
    async counts(prefix = '') {
      const res = await pool.query<{ id: string; n: string }>(
        `SELECT id, count(*) AS n FROM ${effects} WHERE id LIKE $1 GROUP BY id`,
        [`${prefix}%`],
      );
      return new Map(res.rows.map((r) => [r.id, Number(r.n)]));
    },
    async total() {
      return Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${effects}`)).rows[0]!.n);
    },
    rows,
    async check(expectedIds, checkOrderPerKey = false) {
      const prefix = commonPrefix(expectedIds);
      const effects = (await rows())
        .filter((r) => r.id.startsWith(prefix))
        .map((r) => ({ messageId: r.id, key: r.key }));
      return checkEffects(effects, { expectedIds, checkOrderPerKey });
    },
    async ledger(name = 'fx') {
      const s = freshSchemaName(`${prefix}_${name}`);
      schemas.push(s);
      return createLedger(pool, s);
    },
    async close() {
      for (const s of schemas) await dropSchema(pool, s).catch(() => {});
      await pool.end();
    },
  };
}

function commonPrefix(ids: readonly string[]): string {
  if (ids.length === 0) return '';
  let p = ids[0]!;
  for (const id of ids) while (!id.startsWith(p)) p = p.slice(0, -1);
  return p;
}
