import type { OnceError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Liveness } from '../message/envelope.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import type { LeaseSql } from '../sql/lease.js';
import { leaseLost } from './lease-errors.js';

/** What a {@link LeaseClock} renews. */
export interface LeaseClockSpec {
  pool: PgPoolLike;
  sql: LeaseSql;
  consumer: string;
  id: string;
  owner: string;
  leaseMs: number;
  heartbeatMs: number;
  liveness: Liveness | undefined;
  logger: Logger;
  /** Called once when the lease is lost, or cannot be confirmed within `leaseMs`. */
  onLost: (error: OnceError) => void;
}

/**
 * The lease of one claimed message, renewed every `heartbeatMs` while its handler runs. Each
 * renewal also extends the broker's liveness of the delivery (one clock). A renewal that finds
 * another owner means the lease is lost; renewals that keep failing for `leaseMs` mean it may be
 * lost: either way `onLost` fires (the handler's signal aborts) and renewals stop.
 */
export class LeaseClock {
  readonly #spec: LeaseClockSpec;
  #timer: NodeJS.Timeout | undefined;
  #confirmedAt = performance.now();
  #inFlight = false;
  #lost: OnceError | undefined;
  #stopped = false;

  constructor(spec: LeaseClockSpec) {
    this.#spec = spec;
  }

  /** Set once the lease is known (or feared) lost. */
  get lost(): OnceError | undefined {
    return this.#lost;
  }

  /** Starts the heartbeat; the claim, sent at `claimSentAt` (performance.now()), is the first renewal. */
  start(claimSentAt: number): void {
    this.#confirmedAt = claimSentAt;
    this.#extendLiveness();
    this.#timer = setInterval(() => this.#tick(), this.#spec.heartbeatMs);
  }

  /** Stops renewing; later confirmations and losses are ignored (the message has settled). */
  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Renews now. Throws LEASE_LOST when another worker holds the id, or the database's error. */
  async renew(): Promise<void> {
    const s = this.#spec;
    const sentAt = performance.now();
    const res = await s.pool.query(s.sql.renew, [s.consumer, s.id, s.owner, s.leaseMs]);
    if (res.rowCount === 0) {
      const err = leaseLost(s.consumer, s.id, 'another worker took the message over');
      this.#lose(err);
      throw err;
    }
    this.confirmed(sentAt);
  }

  /**
   * The lease was renewed by a statement sent at `sentAt` (performance.now()): the database set
   * the new expiry after that moment, so counting from it never overestimates what is left.
   */
  confirmed(sentAt: number): void {
    this.#confirmedAt = Math.max(this.#confirmedAt, sentAt);
    if (!this.#stopped) this.#extendLiveness();
  }

  /** The store saw another owner. */
  lose(err: OnceError): void {
    this.#lose(err);
  }

  #tick(): void {
    if (this.#lost) return;
    // Checked even while a renewal hangs: a renewal stuck in a dead network is no renewal.
    if (performance.now() - this.#confirmedAt >= this.#spec.leaseMs) {
      this.#lose(
        leaseLost(
          this.#spec.consumer,
          this.#spec.id,
          `not renewed within leaseMs (${this.#spec.leaseMs} ms)`,
        ),
      );
      return;
    }
    if (this.#inFlight) return;
    this.#inFlight = true;
    this.renew()
      .catch((err: unknown) => {
        if (this.#lost) return;
        this.#spec.logger.warn(
          {
            consumer: this.#spec.consumer,
            id: this.#spec.id,
            error: String(err),
          },
          'once: lease renewal failed; retrying at the next heartbeat',
        );
      })
      .finally(() => {
        this.#inFlight = false;
      });
  }

  #lose(err: OnceError): void {
    if (this.#lost || this.#stopped) return;
    this.#lost = err;
    this.stop();
    try {
      this.#spec.onLost(err);
    } catch {
      // onLost aborts a signal; a throwing abort listener must not break the clock
    }
  }

  #extendLiveness(): void {
    const { liveness, leaseMs, logger } = this.#spec;
    if (!liveness) return;
    try {
      Promise.resolve(liveness.extend(leaseMs)).catch((err: unknown) => {
        logger.warn({ error: String(err) }, 'once: the adapter could not extend the delivery');
      });
    } catch (err) {
      logger.warn({ error: String(err) }, 'once: the adapter could not extend the delivery');
    }
  }
}
