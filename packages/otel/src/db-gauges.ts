import { type Logger, type PgPoolLike, serializeError } from '@once/core';
import type { Attributes, BatchObservableCallback, Meter, Observable } from '@opentelemetry/api';
import { Attr } from './attributes.js';
import { inboxGauges, outboxGauges } from './instruments.js';
import type { GaugeSql } from './sql.js';

/** What a gauge set needs: where to read, what to read, and where to report a failed read. */
export interface GaugeSpec {
  meter: Meter;
  pool: PgPoolLike;
  schema: string;
  sql: GaugeSql;
  logger: Logger;
}

/**
 * Registers a batch callback that reads its values in one statement per collection. A read that
 * is still running when the next collection starts is shared, not repeated: a slow database
 * must not pile up gauge queries. A failed read observes nothing and logs a warning.
 * Returns the function that unregisters the callback.
 */
function register<Row>(
  spec: GaugeSpec,
  observables: Observable[],
  read: () => Promise<Row | undefined>,
  observe: (row: Row, result: Parameters<BatchObservableCallback>[0], attrs: Attributes) => void,
): () => void {
  const attrs: Attributes = { [Attr.schema]: spec.schema };
  let inflight: Promise<Row | undefined> | undefined;
  const callback: BatchObservableCallback = async (result) => {
    inflight ??= read().finally(() => {
      inflight = undefined;
    });
    let row: Row | undefined;
    try {
      row = await inflight;
    } catch (err) {
      spec.logger.warn('once/otel: a gauge read failed; nothing observed', {
        schema: spec.schema,
        error: serializeError(err).message,
      });
      return;
    }
    if (row) observe(row, result, attrs);
  };
  spec.meter.addBatchObservableCallback(callback, observables);
  return () => spec.meter.removeBatchObservableCallback(callback, observables);
}

/** `once.inbox.rows` and `once.inbox.purge.lag`. */
export function observeInbox(spec: GaugeSpec): () => void {
  const g = inboxGauges(spec.meter);
  return register(
    spec,
    [g.rows, g.purgeLag],
    async () =>
      (
        await spec.pool.query<{ rows: number | null; purge_lag_s: number | null }>(spec.sql.inbox, [
          spec.sql.inboxRegclass,
        ])
      ).rows[0],
    (row, result, attrs) => {
      if (row.rows !== null) result.observe(g.rows, row.rows, attrs);
      result.observe(g.purgeLag, Math.max(0, row.purge_lag_s ?? 0), attrs);
    },
  );
}

/** `once.outbox.pending` and `once.outbox.lag`. */
export function observeOutbox(spec: GaugeSpec, pendingLimit: number): () => void {
  const g = outboxGauges(spec.meter);
  return register(
    spec,
    [g.pending, g.lag],
    async () =>
      (await spec.pool.query<{ pending: number; lag_s: number | null }>(spec.sql.outbox, [pendingLimit]))
        .rows[0],
    (row, result, attrs) => {
      result.observe(g.pending, row.pending, attrs);
      result.observe(g.lag, Math.max(0, row.lag_s ?? 0), attrs);
    },
  );
}
