import type { Message } from '@aws-sdk/client-sqs';
import type { Envelope } from '@once/core';

/** A received message while this consumer holds it (between receive and settle). */
export interface Held {
  readonly message: Message;
  readonly envelope: Envelope;
  readonly receipt: string;
  /** The message group (FIFO), if any. */
  readonly group: string | undefined;
  /** `keyOf`'s key (batch mode), if any: no two transactions at once hold one key. */
  readonly key?: string | undefined;
  /** When it was received, `performance.now()` ms. */
  readonly receivedAt: number;
  /** When its visibility was last set, `performance.now()` ms. */
  extendedAt: number;
  /** Past `maxHeldMs`: no longer extended, and not started if it has not been. */
  capped: boolean;
  /** Being settled: the heartbeat leaves it alone. */
  settling: boolean;
  /**
   * Lease mode: core's lease clock has claimed it and now drives its visibility (one clock), so
   * the adapter's heartbeat leaves it alone. Before the claim (waiting behind its group or for a
   * free handler) the heartbeat keeps it invisible as in transactional mode.
   */
  leased?: boolean;
  /** Lease mode: the visibility change in flight, which a settle's own change must follow. */
  extending?: Promise<void> | undefined;
}
