import { describe, expect, it } from 'vitest';
// @ts-expect-error plain JavaScript modules of the demo runner, without declarations
import { report, rowHolds } from '../../scripts/demo/report.mjs';
// @ts-expect-error plain JavaScript modules of the demo runner, without declarations
import { effectsHold } from '../../scripts/demo/run-example.mjs';

const row = (stages: { name: string; total: number; unique: number }[], effectsOk: boolean) => ({
  name: 'http-payments',
  broker: 'http',
  sent: 130,
  unique: 100,
  seen: 120,
  dropped: 20,
  effects: 100,
  effectsOk,
  stages,
  domain: { ok: true, detail: 'fine' },
  killedAt: 40,
  seconds: 1,
  problems: [],
});

describe('demo stages (a chain of effects under one row)', () => {
  it('holds only when the effects and every stage equal unique', () => {
    const all = { total: 100, unique: 100 };
    expect(effectsHold(all, [], 100)).toBe(true);
    expect(
      effectsHold(
        all,
        [
          { name: 'charges', ...all },
          { name: 'receipts', ...all },
        ],
        100,
      ),
    ).toBe(true);
    // A stage with a second effect for one id, or one missing, fails the row.
    expect(effectsHold(all, [{ name: 'receipts', total: 101, unique: 100 }], 100)).toBe(false);
    expect(effectsHold(all, [{ name: 'receipts', total: 99, unique: 99 }], 100)).toBe(false);
    expect(effectsHold({ total: 101, unique: 100 }, [{ name: 'receipts', ...all }], 100)).toBe(false);
  });

  it('prints each stage under its row, with its verdict, and the http legend', () => {
    const out: string = report(
      [
        row(
          [
            { name: 'charges', total: 100, unique: 100 },
            { name: 'receipts', total: 101, unique: 100 },
          ],
          false,
        ),
      ],
      { count: 100, dupShare: 0.25 },
    );
    const lines = out.split('\n');
    const charges = lines.find((l) => l.startsWith('  charges'));
    const receipts = lines.find((l) => l.startsWith('  receipts'));
    expect(charges).toMatch(/ 100 +yes$/);
    expect(receipts).toMatch(/ 101 +NO$/);
    expect(lines.indexOf(charges!)).toBe(lines.findIndex((l) => l.startsWith('http-payments')) + 1);
    expect(out).toContain('http: "sent" counts every request');
    expect(rowHolds(row([], false))).toBe(false);
  });
});
