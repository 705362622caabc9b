import { describe, expect, it } from 'vitest';
import { createProgress, renderBar } from '../../src/progress.js';

function sink(isTTY: boolean) {
  const chunks: string[] = [];
  return { isTTY, chunks, write: (c: string | Uint8Array) => chunks.push(String(c)) };
}

describe('renderBar', () => {
  it('fills against the total, capped at 100%', () => {
    expect(renderBar(0, 10)).toBe(`[${'.'.repeat(30)}]   0%`);
    expect(renderBar(5, 10)).toBe(`[${'#'.repeat(15)}${'.'.repeat(15)}]  50%`);
    expect(renderBar(12, 10)).toBe(`[${'#'.repeat(30)}] 100%`);
    expect(renderBar(3, 0)).toBe(`[${'#'.repeat(30)}] 100%`);
  });
});

describe('createProgress', () => {
  it('on a terminal redraws one line with \\r and ends it with a newline', () => {
    const s = sink(true);
    const p = createProgress(s, { unit: 'rows', verb: 'purged', total: 4 });
    p.update(2);
    p.finish(4);
    expect(s.chunks).toEqual([`\r${renderBar(2, 4)} 2/4 rows`, `\r${renderBar(4, 4)} 4/4 rows`, '\n']);
  });

  it('elsewhere prints plain lines, at most one per interval, and always the last', () => {
    const s = sink(false);
    let now = 0;
    const p = createProgress(s, {
      unit: 'rows',
      verb: 'purged',
      total: 100,
      intervalMs: 1000,
      now: () => now,
    });
    p.update(10); // printed: the first
    now = 500;
    p.update(20); // throttled
    now = 1000;
    p.update(30); // printed
    now = 1200;
    p.update(40); // throttled
    p.finish(40); // printed: the last
    expect(s.chunks).toEqual(['purged 10/100 rows\n', 'purged 30/100 rows\n', 'purged 40/100 rows\n']);
  });

  it('does not repeat a last line already printed; an unknown total prints the count alone', () => {
    const s = sink(false);
    const p = createProgress(s, { unit: 'rows', verb: 'purged', total: 0 });
    p.update(5);
    p.finish(5);
    expect(s.chunks).toEqual(['purged 5 rows\n']);
  });

  it('more done than estimated (rows expired meanwhile) raises the total shown', () => {
    const s = sink(false);
    createProgress(s, { unit: 'rows', verb: 'purged', total: 3 }).finish(5);
    expect(s.chunks).toEqual(['purged 5/5 rows\n']);
  });
});
