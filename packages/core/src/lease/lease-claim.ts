/**
 * The lease-mode claim. Owns one decision: whether this delivery gets the id (a new row, or a
 * takeover of an `in_progress` row whose lease ran out) in a short transaction of its own, with
 * what earlier attempts recorded; or, when it does not, the outcome of the row in its way.
 */

import type { Item } from '../engine/item.js';
import type { ResolvedInboxOptions } from '../engine/options.js';
import type { Outcomes } from '../engine/outcomes.js';
import { outcomeOfRow, type StoredRow } from '../engine/stored-row.js';
import type { Events } from '../message/events.js';
import { hexBytes } from '../message/fingerprint.js';
import type { Outcome } from '../message/outcome.js';
import { Connection } from '../pg/connection.js';
import { classifyDbError } from '../pg/sqlstate.js';
import { rollback } from '../pg/transaction.js';
import { fromJsonb } from '../sql/jsonb.js';
import type { LeaseSql } from '../sql/lease.js';

/** A held claim: who holds it, and what earlier attempts recorded. */
export interface Claimed {
  item: Item;
  owner: string;
  attempt: number;
  recorded: Map<string, unknown>;
  /** When the claim was sent (performance.now()): the lease runs from no earlier than this. */
  sentAt: number;
}

interface ReadRow extends StoredRow {
  owner: string | null;
  lease_left_ms: number | null;
}

export class LeaseClaim<R> {
  readonly #o: ResolvedInboxOptions<R>;
  readonly #sql: LeaseSql;
  readonly #leaseMs: number;
  readonly #out: Outcomes<R>;
  readonly #events: Events;
  /** READ COMMITTED whatever the inbox's isolation: the claim's ON CONFLICT re-check needs it. */
  readonly #begin: string;

  constructor(o: ResolvedInboxOptions<R>, leaseMs: number, sql: LeaseSql, out: Outcomes<R>, events: Events) {
    this.#leaseMs = leaseMs;
    this.#o = o;
    this.#sql = sql;
    this.#out = out;
    this.#events = events;
    this.#begin = sql.begin('read committed', o.lockTimeoutMs);
  }

  /** Claims the id in a short transaction and reads its recorded steps; or the outcome of not getting it. */
  async take(item: Item, owner: string): Promise<Claimed | Outcome<R>> {
    const o = this.#o;
    const sentAt = performance.now();
    let conn: Connection;
    try {
      conn = await Connection.open(o.pool);
    } catch (err) {
      return this.#out.unavailable(item.envelope, item.id, err);
    }
    try {
      await conn.client.query(this.#begin);
      const claimed = await conn.client.query<{ attempts: number; fresh: boolean; took_over: boolean }>(
        this.#sql.claim,
        [
          o.consumer,
          item.id,
          hexBytes(item.fpHex),
          owner,
          this.#leaseMs,
          o.retentionMs,
          o.conflictPolicy !== 'reject',
        ],
      );
      const attempts = claimed.rows[0]?.attempts;
      if (attempts === undefined) {
        // A new statement: under READ COMMITTED it sees the rival that made the claim wait.
        const row = (await conn.client.query<ReadRow>(this.#sql.read, [o.consumer, item.id])).rows[0];
        await conn.client.query('COMMIT');
        conn.release();
        return row
          ? this.#fromRow(item, row)
          : this.#out.retry(item.envelope, item.id, new Error('claim vanished'), false);
      }
      // A fresh claim has no steps: the claim deleted any stale ones left under the id.
      const rows = claimed.rows[0]?.fresh
        ? []
        : (
            await conn.client.query<{ step: string; json: string | null }>(this.#sql.readSteps, [
              o.consumer,
              item.id,
            ])
          ).rows;
      await conn.client.query('COMMIT');
      conn.release();
      const recorded = new Map(
        rows.map((r) => [r.step, r.json === null ? undefined : fromJsonb(JSON.parse(r.json))]),
      );
      if (claimed.rows[0]?.took_over) {
        this.#events.emit('lease:takeover', {
          consumer: o.consumer,
          id: item.id,
          source: item.envelope.source,
          attempt: attempts,
        });
      }
      return { item, owner, attempt: attempts, recorded, sentAt };
    } catch (err) {
      await rollback(conn, err);
      if (classifyDbError(err) === 'busy') return this.#out.busy(item.envelope, item.id, o.busyDelayMs);
      // The handler never started: whatever failed here is not the message's doing.
      return this.#out.unavailable(item.envelope, item.id, err);
    }
  }

  /** The outcome for a row this delivery could not claim. */
  #fromRow(item: Item, row: ReadRow): Outcome<R> {
    // In progress: redeliver when the holder's lease runs out; then it is either done or free to
    // take over.
    const left = Math.ceil(row.lease_left_ms ?? 0);
    return outcomeOfRow(this.#out, item, row, Math.max(this.#o.busyDelayMs, left));
  }
}
