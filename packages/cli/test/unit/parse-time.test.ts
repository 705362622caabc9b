import { describe, expect, it } from 'vitest';
import { interruptedExit } from '../../src/interrupted.js';
import { parseTime } from '../../src/parse-time.js';

describe('parseTime (forget --since, --until)', () => {
  const now = Date.parse('2026-11-24T08:00:00Z');
  const p = parseTime(() => now);

  it('a duration ago, by this machine clock', () => {
    expect(p('90m').toISOString()).toBe('2026-11-24T06:30:00.000Z');
    expect(p('2h').toISOString()).toBe('2026-11-24T06:00:00.000Z');
    expect(p('1d').toISOString()).toBe('2026-11-23T08:00:00.000Z');
    expect(p('30s').toISOString()).toBe('2026-11-24T07:59:30.000Z');
  });

  it('ISO 8601 dates and date-times, with a zone or an offset', () => {
    expect(p('2026-11-24T06:00:00Z').toISOString()).toBe('2026-11-24T06:00:00.000Z');
    expect(p('2026-11-24T07:00:00+01:00').toISOString()).toBe('2026-11-24T06:00:00.000Z');
    expect(p('2026-11-24').toISOString()).toBe('2026-11-24T00:00:00.000Z');
  });

  it('refuses anything else with the forms it takes', () => {
    for (const bad of ['yesterday', '2h ago', '-1h', '1w', '2026-13-45', '11/24/2026', '']) {
      expect(() => p(bad), bad).toThrow(/must be an ISO 8601 time .* or a duration ago/);
    }
  });
});

describe('interruptedExit', () => {
  it('130 for Ctrl-C, 143 for SIGTERM, undefined when not aborted', () => {
    const c = new AbortController();
    expect(interruptedExit(c.signal)).toBeUndefined();
    expect(interruptedExit(undefined)).toBeUndefined();
    c.abort('SIGINT');
    expect(interruptedExit(c.signal)).toBe(130);
    const t = new AbortController();
    t.abort('SIGTERM');
    expect(interruptedExit(t.signal)).toBe(143);
  });
});
