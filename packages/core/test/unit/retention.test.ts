import { describe, expect, it } from 'vitest';
import { warnIfRetentionShort } from '../../src/adapter/retention.js';

const DAY = 86_400_000;

function capture() {
  const warnings: { message: string; fields: Record<string, unknown> | undefined }[] = [];
  const logger = {
    debug() {},
    info() {},
    error() {},
    warn: (fields: Record<string, unknown>, message: string) => void warnings.push({ message, fields }),
  };
  return { logger, warnings };
}

describe('warnIfRetentionShort', () => {
  it('warns when the inbox forgets ids before the broker stops redelivering, naming both and the fix', () => {
    const { logger, warnings } = capture();
    const warned = warnIfRetentionShort(logger, {
      consumer: 'payments',
      retentionMs: 7 * DAY,
      horizonMs: 14 * DAY,
      source: 'SQS queue https://sqs/q (MessageRetentionPeriod)',
    });
    expect(warned).toBe(true);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toBe(
      'once: consumer "payments" remembers processed ids for 7 days, but SQS queue https://sqs/q ' +
        '(MessageRetentionPeriod) can deliver a message again for 14 days: a redelivery after the inbox ' +
        "row is purged runs again. Raise retentionMs to at least the broker's horizon",
    );
    expect(warnings[0]?.fields).toEqual({
      consumer: 'payments',
      retentionMs: 7 * DAY,
      horizonMs: 14 * DAY,
      source: 'SQS queue https://sqs/q (MessageRetentionPeriod)',
    });
  });

  it('a broker that keeps messages forever; short spans in hours', () => {
    const { logger, warnings } = capture();
    warnIfRetentionShort(logger, {
      consumer: 'c',
      retentionMs: 6 * 3_600_000,
      horizonMs: Number.POSITIVE_INFINITY,
      source: 'Kafka topic t',
    });
    expect(warnings[0]?.message).toContain(
      'for 6 hours, but Kafka topic t can deliver a message again with no time limit',
    );
    expect(warnings[0]?.message).toMatch(/at least the broker's horizon$/);
  });

  it('silent when retention covers the horizon, equal included', () => {
    const { logger, warnings } = capture();
    expect(
      warnIfRetentionShort(logger, { consumer: 'c', retentionMs: 7 * DAY, horizonMs: 7 * DAY, source: 's' }),
    ).toBe(false);
    expect(
      warnIfRetentionShort(logger, { consumer: 'c', retentionMs: 8 * DAY, horizonMs: 7 * DAY, source: 's' }),
    ).toBe(false);
    expect(warnings).toEqual([]);
  });
});
