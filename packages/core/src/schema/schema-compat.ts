import { ErrorCode, OnceError } from '../errors.js';
import type { Queryable } from '../pg/pg-like.js';
import { migrationSql } from '../sql/inbox.js';
import { compatibleFrom, LATEST_SCHEMA_VERSION, MIGRATIONS, type Migration } from './migrations.js';

/**
 * Where an installed schema stands against this build: `not-installed` (version 0), `behind`
 * (run `migrate`), `current`, `ahead` (a newer build migrated it, only expanding what this one
 * uses: it runs on it) or `too-new` (a newer build removed something this one uses: upgrade it).
 */
export type SchemaStatus = 'not-installed' | 'behind' | 'current' | 'ahead' | 'too-new';

/** A schema's version judged against this build (see docs/upgrades.md). */
export interface SchemaStanding {
  readonly status: SchemaStatus;
  /**
   * The oldest code version that runs on the schema: this build's own reckoning for a version it
   * knows, what the newer build recorded for one it does not; null when the schema is not
   * installed, or is newer and records none (written before @once/core recorded it).
   */
  readonly compatibleFrom: number | null;
  /** `too-new` only: why no code of this build's version runs on it, in words (what removed what). */
  readonly tooNew: string | null;
}

/**
 * Judges the installed `version` of `schema` (`quoted`: the same name, quoted) against the build
 * whose migrations are `migrations`. Only a version newer than the build reads anything: what
 * its newest rows recorded.
 */
export async function judgeSchema(
  db: Queryable,
  schema: string,
  quoted: string,
  version: number,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<SchemaStanding> {
  const latest = migrations[migrations.length - 1]?.version ?? 0;
  if (version === 0) return { status: 'not-installed', compatibleFrom: null, tooNew: null };
  if (version <= latest) {
    const status = version < latest ? 'behind' : 'current';
    return { status, compatibleFrom: compatibleFrom(migrations, version), tooNew: null };
  }
  let row:
    | {
        compatible_from: number | null;
        cut_version: number | null;
        cut_name: string | null;
        cut_removes: string | null;
      }
    | undefined;
  try {
    row = (await db.query(migrationSql(quoted).compatibility, [latest])).rows[0];
  } catch (err) {
    // 42703: a version table without the columns, which only a hand-made row can have put ahead.
    if ((err as { code?: unknown }).code !== '42703') throw err;
  }
  const from = row?.compatible_from ?? null;
  if (from === null) {
    return {
      status: 'too-new',
      compatibleFrom: null,
      tooNew: `schema ${schema} is at version ${version} and records no oldest compatible version (written by hand or by a tool that does not record one)`,
    };
  }
  if (from <= latest) return { status: 'ahead', compatibleFrom: from, tooNew: null };
  const cut =
    row?.cut_version == null
      ? ''
      : `, and version ${row.cut_version} (${row.cut_name}) removed ${row.cut_removes ?? 'what it needs'}`;
  return {
    status: 'too-new',
    compatibleFrom: from,
    tooNew: `schema ${schema} is at version ${version}${cut}: it runs code of schema version ${from} or later`,
  };
}

/** Throws SCHEMA_TOO_NEW for a `too-new` standing: which migration removed what, what to upgrade. */
export function refuseTooNew(standing: SchemaStanding): void {
  if (standing.status !== 'too-new') return;
  throw new OnceError(
    ErrorCode.SchemaTooNew,
    `${standing.tooNew}; this @once/core is at schema version ${LATEST_SCHEMA_VERSION}: upgrade @once/core`,
  );
}
