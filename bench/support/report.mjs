import { execFileSync } from 'node:child_process';

/**
 * How every bench reports a ratio (issue #14, step 6): the variants run in interleaved
 * repetitions, each repetition gives one ratio of two runs made side by side, and the figure is the
 * median of those per-repetition ratios with their min and max. Pairing within a repetition keeps a
 * noisy neighbour, which slows both runs of a repetition alike, out of the ratio.
 */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Per-repetition ratios a[i] ÷ b[i] of `value(run)`; { median, min, max, n }, or undefined if unpaired. */
export function pairedRatio(as, bs, value) {
  const n = Math.min(as?.length ?? 0, bs?.length ?? 0);
  if (n === 0) return undefined;
  const rs = [];
  for (let i = 0; i < n; i++) rs.push(value(as[i]) / value(bs[i]));
  return { median: median(rs), min: Math.min(...rs), max: Math.max(...rs), n };
}

/** "0.93× [0.88–0.97]" */
export const fmtRatio = (r) =>
  r ? `${r.median.toFixed(2)}× [${r.min.toFixed(2)}–${r.max.toFixed(2)}]` : 'n/a';

/** The short commit the bench ran at, for its results file. */
export function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}
