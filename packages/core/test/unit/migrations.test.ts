import { describe, expect, it } from 'vitest';
import {
  compatibleFrom,
  LATEST_SCHEMA_VERSION,
  MIGRATIONS,
  type Migration,
} from '../../src/schema/migrations.js';

const expand = (version: number): Migration => ({ version, name: `e${version}`, sql: '', change: 'expand' });
const contract = (version: number, from?: number): Migration => ({
  version,
  name: `c${version}`,
  sql: '',
  change: 'contract',
  removes: `x${version}`,
  ...(from === undefined ? {} : { compatibleFrom: from }),
});

describe('MIGRATIONS', () => {
  it('are numbered 1, 2, 3, ... and each says whether it expands or contracts', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    expect(LATEST_SCHEMA_VERSION).toBe(MIGRATIONS.length);
    for (const m of MIGRATIONS) {
      expect(['expand', 'contract'], m.name).toContain(m.change);
      if (m.change === 'contract') expect(m.removes.length, m.name).toBeGreaterThan(0);
    }
  });

  it('1 to 8 expand; 9 (the cascade from inbox to steps dropped) contracts, compatible from itself', () => {
    expect(MIGRATIONS.filter((m) => m.change === 'contract').map((m) => m.version)).toEqual([9]);
    expect(compatibleFrom(MIGRATIONS, 8)).toBe(1);
    expect(compatibleFrom(MIGRATIONS, 9)).toBe(9);
    expect(compatibleFrom(MIGRATIONS, LATEST_SCHEMA_VERSION)).toBe(9);
  });

  it('10 (republish-mark) and 11 (inflight, the Kafka replay marker as a row) expand: code of 9 runs on them', () => {
    expect(MIGRATIONS.slice(9).map((m) => [m.version, m.name, m.change])).toEqual([
      [10, 'republish-mark', 'expand'],
      [11, 'inflight', 'expand'],
    ]);
    expect(compatibleFrom(MIGRATIONS, 11)).toBe(9);
    // An expand only creates: nothing of an earlier version is dropped, altered or renamed.
    expect(MIGRATIONS[10]!.sql).not.toMatch(/\b(DROP|ALTER|RENAME)\b/i);
  });
});

describe('compatibleFrom', () => {
  it('is 1 while every migration expands', () => {
    const list = [expand(1), expand(2), expand(3)];
    expect([1, 2, 3].map((v) => compatibleFrom(list, v))).toEqual([1, 1, 1]);
  });

  it('a contract migration raises it to its own version, from that version on', () => {
    const list = [expand(1), expand(2), contract(3), expand(4)];
    expect([1, 2, 3, 4].map((v) => compatibleFrom(list, v))).toEqual([1, 1, 3, 3]);
  });

  it('a contract that removes what code stopped using earlier names that version', () => {
    // Version 4 stops reading a column, version 5 drops it: code of version 4 still runs on 5.
    const list = [expand(1), expand(2), expand(3), expand(4), contract(5, 4)];
    expect(compatibleFrom(list, 5)).toBe(4);
  });

  it('never falls: a later contract cannot give back what an earlier one removed', () => {
    const list = [expand(1), contract(2), contract(3, 1)];
    expect(compatibleFrom(list, 3)).toBe(2);
  });
});
