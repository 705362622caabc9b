import { describe, expect, it } from 'vitest';
import { checkEffects } from '../support/index.js';

const e = (messageId: string, key = 'k') => ({ messageId, key });

describe('checkEffects', () => {
  it('is ok when every expected id has exactly one effect', () => {
    const r = checkEffects([e('a'), e('b'), e('c')], {
      expectedIds: ['a', 'b', 'c'],
      checkOrderPerKey: true,
    });
    expect(r).toEqual({ ok: true, lost: [], duplicated: [], unexpected: [], orderViolations: [], total: 3 });
  });

  it('reports lost, duplicated and unexpected ids', () => {
    const r = checkEffects([e('a'), e('a'), e('x'), e('a'), e('c')], { expectedIds: ['a', 'b', 'c'] });
    expect(r.ok).toBe(false);
    expect(r.lost).toEqual(['b']);
    expect(r.duplicated).toEqual([{ id: 'a', count: 3 }]);
    expect(r.unexpected).toEqual(['x']);
    expect(r.total).toBe(5);
  });

  it('ignores order unless asked', () => {
    expect(checkEffects([e('b'), e('a')], { expectedIds: ['a', 'b'] }).ok).toBe(true);
  });

  it('checks order within a key only, by first effect', () => {
    // Keys interleave freely; a duplicate of an earlier id later on is a duplicate, not disorder.
    const effects = [e('a1', 'A'), e('b1', 'B'), e('a2', 'A'), e('b2', 'B'), e('a1', 'A')];
    const r = checkEffects(effects, { expectedIds: ['b1', 'a1', 'b2', 'a2'], checkOrderPerKey: true });
    expect(r.orderViolations).toEqual([]);
    expect(r.duplicated).toEqual([{ id: 'a1', count: 2 }]);
  });

  it('reports the first out-of-order position per key, leaving lost ids out', () => {
    const effects = [e('a1', 'A'), e('a3', 'A'), e('a2', 'A'), e('b1', 'B')];
    const r = checkEffects(effects, { expectedIds: ['a1', 'a2', 'a3', 'a4', 'b1'], checkOrderPerKey: true });
    expect(r.lost).toEqual(['a4']);
    expect(r.orderViolations).toEqual([
      { key: 'A', expected: ['a1', 'a2', 'a3'], actual: ['a1', 'a3', 'a2'], firstMismatchAt: 1 },
    ]);
    expect(r.ok).toBe(false);
  });

  it('treats an empty run as everything lost', () => {
    expect(checkEffects([], { expectedIds: ['a'] })).toMatchObject({ ok: false, lost: ['a'], total: 0 });
  });
});
