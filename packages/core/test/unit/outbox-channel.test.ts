import { describe, expect, it } from 'vitest';
import { listenSql, outboxChannel } from '../../src/sql/outbox.js';

// PostgreSQL identifiers (channel names included) are at most 63 bytes. LISTEN truncates a longer
// name and pg_notify refuses it, so a channel past the limit would never deliver a wake-up.

const name = (n: number, c = 'a') => c.repeat(n);

describe('outboxChannel', () => {
  it('is once_outbox_<schema> while that fits in 63 bytes', () => {
    expect(outboxChannel('once')).toBe('once_outbox_once');
    expect(outboxChannel(name(51))).toBe(`once_outbox_${name(51)}`);
  });

  it('fits in 63 bytes for every legal schema length, and is a plain identifier', () => {
    for (let n = 1; n <= 63; n++) {
      const channel = outboxChannel(name(n, 's'));
      expect(Buffer.byteLength(channel)).toBeLessThanOrEqual(63);
      expect(channel).toMatch(/^once_outbox_[a-z0-9_]+$/);
    }
    expect(Buffer.byteLength(outboxChannel(name(52)))).toBe(63);
  });

  it('tells apart long schema names that share their first 51 characters', () => {
    const base = name(51, 'x');
    const channels = new Set(['a', 'b', 'ab', '0123456789ab'].map((tail) => outboxChannel(`${base}${tail}`)));
    expect(channels.size).toBe(4);
    // Stable: the relay and every notifier derive it on their own.
    expect(outboxChannel(`${base}ab`)).toBe(outboxChannel(`${base}ab`));
  });

  it('refuses a schema name that is not a plain identifier', () => {
    expect(() => outboxChannel('Once')).toThrow(/lower-case SQL identifier/);
    expect(() => outboxChannel(name(64))).toThrow(/at most 63 characters/);
  });

  it('LISTEN and UNLISTEN name the same channel, quoted', () => {
    const schema = name(63, 'q');
    const sql = listenSql(schema);
    expect(sql.listen).toBe(`LISTEN "${outboxChannel(schema)}"`);
    expect(sql.unlisten).toBe(`UNLISTEN "${outboxChannel(schema)}"`);
  });
});
