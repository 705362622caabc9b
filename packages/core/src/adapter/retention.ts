import type { Logger } from '../logger.js';

/** What {@link warnIfRetentionShort} compares. */
export interface RetentionCheck {
  /** The consumer name, for the warning. */
  consumer: string;
  /** How long the inbox remembers a processed id (the consumer's `retentionMs`). */
  retentionMs: number;
  /** How long the broker may still deliver a message again; `Infinity` when it keeps messages forever. */
  horizonMs: number;
  /** The source it applies to, e.g. `SQS queue <url>` or `Kafka topic orders`. */
  source: string;
}

/**
 * Warns (once per call) when the inbox forgets ids sooner than the broker can redeliver them: a
 * message delivered again after its row was purged runs again. DESIGN: "warn when retention is
 * shorter than the broker's redelivery horizon". Returns whether it warned.
 */
export function warnIfRetentionShort(logger: Logger, c: RetentionCheck): boolean {
  if (!(c.retentionMs < c.horizonMs)) return false;
  const horizon = Number.isFinite(c.horizonMs) ? `for ${formatDays(c.horizonMs)}` : 'with no time limit';
  logger.warn(
    { consumer: c.consumer, retentionMs: c.retentionMs, horizonMs: c.horizonMs, source: c.source },
    `once: consumer ${JSON.stringify(c.consumer)} remembers processed ids for ${formatDays(c.retentionMs)}, ` +
      `but ${c.source} can deliver a message again ${horizon}: a redelivery after the inbox row ` +
      `is purged runs again. Raise retentionMs to at least the broker's horizon`,
  );
  return true;
}

function formatDays(ms: number): string {
  const days = ms / 86_400_000;
  return days >= 1 ? `${Number(days.toFixed(2))} days` : `${Number((ms / 3_600_000).toFixed(2))} hours`;
}
