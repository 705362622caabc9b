import { ErrorCode, OnceError } from '../errors.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import { quoteIdentifier } from '../sql/identifier.js';

/** Options of {@link copyInboxRows}. */
export interface CopyInboxOptions {
  /** Once's schema, the same in both databases. @default 'once' */
  readonly schema?: string | undefined;
  /** Only these consumers' rows. @default every consumer's */
  readonly consumers?: readonly string[] | undefined;
  /** Rows per statement. @default 1000 */
  readonly batchSize?: number | undefined;
}

/** What {@link copyInboxRows} did. */
export interface CopyInboxResult {
  /** Inbox rows written into the target. */
  readonly copied: number;
  /** Inbox rows the target had already (left as they were). */
  readonly present: number;
  /** Lease-mode steps written with them. */
  readonly steps: number;
}

/**
 * Copies the processed and failed records of once's inbox (with their lease-mode steps) from one
 * database to another: the step of moving a tenant to another database that keeps the ids it
 * processed from running again there. Rows the target has already are left as they are; rows
 * in progress (a lease being held) are not copied, so hold the tenant first (`route` answers
 * `HOLD`) and let its messages in flight settle. Both databases must be at the same schema
 * version (`SCHEMA_MISMATCH` otherwise, nothing copied). Reads and writes in batches of
 * `batchSize`, each batch its own transaction in the target: a copy cut short can be run again.
 * Copies every consumer's rows unless `consumers` names some: once cannot tell which ids were a
 * tenant's, and extra rows only make the target remember more.
 */
export async function copyInboxRows(
  from: PgPoolLike,
  to: PgPoolLike,
  options: CopyInboxOptions = {},
): Promise<CopyInboxResult> {
  const schema = quoteIdentifier(options.schema ?? 'once', "option 'schema'");
  const batchSize = options.batchSize ?? 1000;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      `option 'batchSize' must be a whole number of at least 1, got ${batchSize}`,
    );
  }
  const consumers = options.consumers === undefined ? null : [...options.consumers];
  const versionSql = `SELECT max(version)::int AS v FROM ${schema}.schema_version`;
  const [a, b] = await Promise.all([
    from.query<{ v: number }>(versionSql),
    to.query<{ v: number }>(versionSql),
  ]);
  const [va, vb] = [a.rows[0]?.v, b.rows[0]?.v];
  if (va !== vb) {
    throw new OnceError(
      ErrorCode.SchemaMismatch,
      `the source database is at schema version ${va} and the target at ${vb}: migrate both to the same version before copying`,
    );
  }
  // Rows as JSON, written back with json_populate_recordset: the same columns on both sides,
  // whatever the version, bytea as its hex text.
  const read = `SELECT consumer, message_id, row_to_json(i)::text AS row FROM ${schema}.inbox i
    WHERE status <> 'in_progress' AND ($1::text[] IS NULL OR consumer = ANY($1))
      AND (consumer, message_id) > ($2, $3)
    ORDER BY consumer, message_id LIMIT $4`;
  const readSteps = `SELECT row_to_json(s)::text AS row FROM ${schema}.steps s
    WHERE (consumer, message_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`;
  const writeRows = `WITH w AS (INSERT INTO ${schema}.inbox
      SELECT * FROM json_populate_recordset(NULL::${schema}.inbox, $1::json)
      ON CONFLICT (consumer, message_id) DO NOTHING RETURNING consumer, message_id)
    SELECT consumer, message_id FROM w`;
  const writeSteps = `INSERT INTO ${schema}.steps
      SELECT * FROM json_populate_recordset(NULL::${schema}.steps, $1::json)
      WHERE (consumer, message_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))
      ON CONFLICT DO NOTHING`;
  let after: [string, string] = ['', ''];
  let copied = 0;
  let present = 0;
  let steps = 0;
  for (;;) {
    const page = await from.query<{ consumer: string; message_id: string; row: string }>(read, [
      consumers,
      after[0],
      after[1],
      batchSize,
    ]);
    if (page.rows.length === 0) break;
    const last = page.rows[page.rows.length - 1]!;
    after = [last.consumer, last.message_id];
    const json = `[${page.rows.map((r) => r.row).join(',')}]`;
    const client = await to.connect();
    try {
      await client.query('BEGIN');
      const written = await client.query<{ consumer: string; message_id: string }>(writeRows, [json]);
      copied += written.rows.length;
      present += page.rows.length - written.rows.length;
      if (written.rows.length > 0) {
        // Only the steps of rows this batch wrote: a row the target had keeps its own steps.
        const cs = written.rows.map((r) => r.consumer);
        const ids = written.rows.map((r) => r.message_id);
        const stepRows = await from.query<{ row: string }>(readSteps, [cs, ids]);
        if (stepRows.rows.length > 0) {
          const res = await client.query(writeSteps, [
            `[${stepRows.rows.map((r) => r.row).join(',')}]`,
            cs,
            ids,
          ]);
          steps += res.rowCount ?? 0;
        }
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }
  return { copied, present, steps };
}
