import { ErrorCode, type Logger, OnceError, type PgPoolLike } from '@once/core';
import { optionCheck } from '@once/core/adapter';
import type { MeterProvider } from '@opentelemetry/api';

/** Options of {@link instrument}. */
export interface InstrumentOptions {
  /** Where the metrics go. @default the global provider (`metrics.getMeterProvider()`) */
  meterProvider?: MeterProvider | undefined;
  /**
   * The pool the gauges read from (one short statement per collection). `false` turns the
   * gauges off. A relay exposes no pool: pass one to get the outbox gauges.
   * @default the inbox's pool for an inbox or a consumer; none for a relay
   */
  pool?: PgPoolLike | false | undefined;
  /** The schema the gauges read. @default the inbox's schema, else 'once' */
  schema?: string | undefined;
  /** Pending outbox rows are counted up to this many (the count is bounded to stay cheap). @default 10000 */
  outboxPendingLimit?: number | undefined;
  /** Where failed gauge reads are reported. @default the inbox's logger, else silent */
  logger?: Logger | false | undefined;
}

/** The defaults of {@link InstrumentOptions}. */
export const DEFAULT_INSTRUMENT_OPTIONS = Object.freeze({
  schema: 'once',
  outboxPendingLimit: 10_000,
});

/** Checks the options' shapes; the target fills in the rest. Names the first bad field. */
export function checkInstrumentOptions(options: InstrumentOptions): InstrumentOptions {
  if (typeof options !== 'object' || options === null) {
    throw new OnceError(ErrorCode.InvalidOption, 'instrument(target, options): options must be an object');
  }
  const p = options.pool;
  if (p !== undefined && p !== false && (typeof p?.query !== 'function' || typeof p.connect !== 'function')) {
    throw new OnceError(ErrorCode.InvalidOption, "option 'pool' must be a pg Pool or false");
  }
  const mp = options.meterProvider;
  if (mp !== undefined && typeof mp?.getMeter !== 'function') {
    throw new OnceError(ErrorCode.InvalidOption, "option 'meterProvider' must have a getMeter() method");
  }
  if (options.outboxPendingLimit !== undefined)
    optionCheck.integer('outboxPendingLimit', options.outboxPendingLimit, 1);
  return options;
}
