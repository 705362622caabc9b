import type { Logger, PgPoolLike } from '@once/core';
import { serializeError } from '@once/core/adapter';
import { readInboxGauges, readOutboxGauges } from '@once/core/admin';
import type { Attributes, BatchObservableCallback, Meter, Observable } from '@opentelemetry/api';
import { Attr } from './attributes.js';
import { inboxGauges, outboxGauges } from './instruments.js';

/** What a gauge set needs: where to read (through core's admin API), and where to report a failed read. */
export interface GaugeSpec {
  meter: Meter;
  pool: PgPoolLike;
  /** Validated by the caller. */
  schema: string;
  logger: Logger;
  /** The database's name in an inbox over several `databases`: the gauges carry it as `db.namespace`. */
  database?: string | undefined;
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
  const attrs: Attributes = {
    [Attr.schema]: spec.schema,
    ...(spec.database === undefined ? {} : { [Attr.dbNamespace]: spec.database }),
  };
  let inflight: Promise<Row | undefined> | undefined;
  const callback: BatchObservableCallback = async (result) => {
    inflight ??= read().finally(() => {
      inflight = undefined;
    });
    let row: Row | undefined;
    try {
      row = await inflight;
    } catch (err) {
      spec.logger.warn(
        {
          schema: spec.schema,
          database: spec.database,
          error: serializeError(err).message,
        },
        'once/otel: a gauge read failed; nothing observed',
      );
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
    () => readInboxGauges(spec.pool, spec.schema),
    (row, result, attrs) => {
      if (row.rowsEstimate !== null) result.observe(g.rows, row.rowsEstimate, attrs);
      result.observe(g.purgeLag, Math.max(0, row.purgeLagSeconds ?? 0), attrs);
    },
  );
}

/** `once.outbox.pending` and `once.outbox.lag`. */
export function observeOutbox(spec: GaugeSpec, pendingLimit: number): () => void {
  const g = outboxGauges(spec.meter);
  return register(
    spec,
    [g.pending, g.lag],
    () => readOutboxGauges(spec.pool, spec.schema, pendingLimit),
    (row, result, attrs) => {
      result.observe(g.pending, row.pending, attrs);
      result.observe(g.lag, Math.max(0, row.lagSeconds ?? 0), attrs);
    },
  );
}
