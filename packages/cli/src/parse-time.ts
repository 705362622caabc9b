import { InvalidArgumentError } from 'commander';

const AGO = /^(\d+)(s|m|h|d)$/;
const UNIT_MS: Readonly<Record<string, number>> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
// A date, optionally with a time and a zone: what Date parses the same way everywhere.
const ISO = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;

/**
 * A commander value parser for a point in time: an ISO 8601 date or date-time
 * (`2026-11-24T06:00:00Z`; without a zone, local time; a date alone is UTC midnight), or a
 * duration ago by this machine's clock (`90m`, `2h`, `1d`).
 */
export function parseTime(now: () => number = Date.now): (value: string) => Date {
  return (value: string) => {
    const v = value.trim();
    const ago = AGO.exec(v);
    if (ago) return new Date(now() - Number(ago[1]) * (UNIT_MS[ago[2] ?? 's'] ?? 0));
    const at = ISO.test(v) ? new Date(v) : new Date(Number.NaN);
    if (Number.isNaN(at.getTime())) {
      throw new InvalidArgumentError(
        `must be an ISO 8601 time (2026-11-24T06:00:00Z) or a duration ago (90m, 2h, 1d), got ${JSON.stringify(value)}`,
      );
    }
    return at;
  };
}
