import { hostname } from 'node:os';
import { ErrorCode, OnceError } from '../errors.js';

/**
 * How a consumer makes its effects once. `transaction`: the handler's effects are writes in
 * the message's Postgres transaction. `lease`: the handler calls things outside Postgres; the
 * id is held by a lease and each external effect is a durable step (`ctx.step`).
 */
export type InboxMode = 'transaction' | 'lease';

/** The lease-mode fields of `InboxOptions`. */
export interface LeaseOptions {
  /** One mode per consumer name: rows of one mode are not understood by the other. @default 'transaction' */
  mode?: InboxMode | undefined;
  /**
   * Lease mode: how long a claim holds the id without renewal, in ms. A worker that stops
   * renewing (crashed, stalled, cut off) loses the id this long after its last renewal; then
   * another delivery takes it over. Also what adapters keep the broker's delivery alive for.
   * @default 30000
   */
  leaseMs?: number | undefined;
  /** Lease mode: interval of lease renewal while a handler runs, in ms. At most half of `leaseMs`. @default leaseMs / 3 */
  heartbeatMs?: number | undefined;
  /**
   * Lease mode: names this worker in the `owner` column, for operators (each claim adds a
   * random suffix, so two claims never share an owner). At most 100 characters.
   * @default `${hostname}:${pid}`
   */
  workerId?: string | undefined;
}

/** {@link LeaseOptions} after defaults. */
export interface ResolvedLeaseOptions {
  readonly mode: InboxMode;
  readonly leaseMs: number;
  readonly heartbeatMs: number;
  readonly workerId: string;
}

export const DEFAULT_LEASE_OPTIONS = Object.freeze({ mode: 'transaction' as InboxMode, leaseMs: 30_000 });

/** Smallest lease, in ms: below it a renewal's own round trip is a sizeable part of the lease. */
export const MIN_LEASE_MS = 10;

function invalid(field: string, message: string): OnceError {
  return new OnceError(ErrorCode.InvalidOption, `options.${field} ${message}`);
}

function duration(field: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw invalid(field, `must be a whole number of milliseconds, got ${JSON.stringify(value)}`);
  }
  if (value < min) throw invalid(field, `must be at least ${min} ms, got ${value}`);
  return value;
}

/** Applies defaults to the lease fields and validates them, naming the bad field. */
export function resolveLeaseOptions(options: LeaseOptions): ResolvedLeaseOptions {
  const mode = options.mode ?? DEFAULT_LEASE_OPTIONS.mode;
  if (mode !== 'transaction' && mode !== 'lease') {
    throw invalid('mode', `must be 'transaction' or 'lease', got ${JSON.stringify(mode)}`);
  }
  const leaseMs = duration('leaseMs', options.leaseMs ?? DEFAULT_LEASE_OPTIONS.leaseMs, MIN_LEASE_MS);
  const heartbeatMs = duration('heartbeatMs', options.heartbeatMs ?? Math.floor(leaseMs / 3), 1);
  if (heartbeatMs * 2 > leaseMs) {
    throw invalid(
      'heartbeatMs',
      `(${heartbeatMs} ms) must be at most half of options.leaseMs (${leaseMs} ms), so that one late renewal does not lose the lease`,
    );
  }
  const workerId = options.workerId ?? `${hostname()}:${process.pid}`;
  if (typeof workerId !== 'string' || workerId.length === 0 || workerId.length > 100) {
    throw invalid(
      'workerId',
      `must be a non-empty string of at most 100 characters, got ${JSON.stringify(workerId)}`,
    );
  }
  return Object.freeze({ mode, leaseMs, heartbeatMs, workerId });
}
