import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';

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

/** The machine a bench ran on, for its results file (the load average at the end of the run). */
export function machine() {
  return { cpus: os.cpus().length, model: os.cpus()[0]?.model, loadavg: os.loadavg(), node: process.version };
}

/** The short commit the bench ran at, for its results file. */
export function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}

/** The ratios a broker bench reports, with their targets (docs/benchmarks.md). */
export const ADAPTER_CHECKS = Object.freeze([
  ['once/msg ÷ floor/msg', 'once/msg', 'floor/msg', 'rate', 0.9, '≥'],
  ['once/batch ÷ floor/batch', 'once/batch', 'floor/batch', 'rate', 0.9, '≥'],
  ['once/msg ÷ floor/msg, CPU µs/msg', 'once/msg', 'floor/msg', 'cpu', 1.15, '≤'],
  ['once/batch ÷ floor/batch, CPU µs/msg', 'once/batch', 'floor/batch', 'cpu', 1.15, '≤'],
  ['once/msg ÷ B1/msg', 'once/msg', 'B1/msg', 'rate', 0.75, '≥'],
  ['once/batch ÷ B1/batch', 'once/batch', 'B1/batch', 'rate', 0.8, '≥'],
  ['once/batch ÷ once/msg', 'once/batch', 'once/msg', 'rate', 4, '≥'],
  ['floor/msg ÷ B1/msg', 'floor/msg', 'B1/msg', 'rate', undefined, '≥'],
  ['floor/batch ÷ B1/batch', 'floor/batch', 'B1/batch', 'rate', undefined, '≥'],
  ['floor/batch ÷ floor/msg', 'floor/batch', 'floor/msg', 'rate', undefined, '≥'],
  ['once/batch ÷ R0 (ceiling)', 'once/batch', 'R0', 'rate', undefined, '≥'],
]);

/**
 * The close of a broker bench (RabbitMQ, NATS, HTTP): per variant the medians of its repetitions,
 * the paired ratios `[label, a, b, 'rate' | 'cpu', target, '≥' | '≤']` with their targets, printed,
 * and `file` (a URL) written with `meta` (the bench's sizes) beside the machine. `runs` is one
 * stream's runs by variant; or `streams`, `[{ mode, duplicates, failures, runs }]`, reports each
 * stream on its own (results gain `mode`; ratios are keyed by mode).
 */
export function closeBench({ runs, streams, reps, checks: defs, file, meta }) {
  const per = (streams ?? [{ runs }]).map((s) => ({ ...s, ...summarise(s, reps, defs) }));
  const results = per.flatMap((s) => s.results);
  const ratioOf = (s) =>
    Object.fromEntries(
      s.checks.map(([l, r, t, cmp]) => [
        l,
        { measured: r.median, min: r.min, max: r.max, reps: r.n, target: t ?? null, cmp },
      ]),
    );
  const ratios = streams ? Object.fromEntries(per.map((s) => [s.mode, ratioOf(s)])) : ratioOf(per[0]);
  mkdirSync(new URL('.', file), { recursive: true });
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        at: new Date().toISOString(),
        commit: gitCommit(),
        ...meta,
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
        results,
        ratios,
      },
      null,
      2,
    )}\n`,
  );
}

/** One stream's medians and paired ratios, printed. */
function summarise({ mode, duplicates, failures, runs }, reps, defs) {
  const results = [];
  for (const list of Object.values(runs)) {
    const med = (k) => median(list.map((r) => r[k]));
    results.push({
      variant: list[0].variant,
      ...(mode ? { mode, duplicates, failures, redeliveredPerRun: med('redelivered') } : {}),
      msgsPerSec: med('msgsPerSec'),
      roundTripsPerMsg: med('roundTripsPerMsg'),
      cpuUsPerMsg: med('cpuUsPerMsg'),
      rssMiB: Math.max(...list.map((r) => r.rssMiB)),
      reps: list.map((r) => Math.round(r.msgsPerSec)),
      repCpuUsPerMsg: list.map((r) => Math.round(r.cpuUsPerMsg)),
    });
  }
  const what = mode
    ? `, ${mode} stream (${duplicates * 100} % duplicates, ${failures * 100} % transient failures)`
    : '';
  console.log(`\n  medians of ${reps}${what}`);
  console.log(`  variant      msg/s  rt/msg  CPU µs/msg   ${mode ? 'redelivered  ' : ''}runs (msg/s)`);
  for (const r of results)
    console.log(
      `  ${r.variant.padEnd(11)} ${r.msgsPerSec.toFixed(0).padStart(7)} ${r.roundTripsPerMsg.toFixed(2).padStart(7)} ${r.cpuUsPerMsg.toFixed(0).padStart(11)}   ${mode ? `${String(r.redeliveredPerRun).padStart(11)}  ` : ''}${r.reps.join(', ')}`,
    );
  // Each ratio: the median of per-repetition paired ratios, with min–max.
  const value = { rate: (r) => r.msgsPerSec, cpu: (r) => r.cpuUsPerMsg };
  const checks = defs
    .map(([label, a, b, kind, target, cmp]) => [
      label,
      pairedRatio(runs[a], runs[b], value[kind]),
      target,
      cmp,
    ])
    .filter(([, r]) => r);
  console.log(`\n  ratio${mode ? `, ${mode}` : ''} (median of paired repetitions [min–max])          target`);
  for (const [label, r, target, cmp] of checks) {
    const ok = cmp === '≥' ? r.median >= target : r.median <= target;
    const verdict = target === undefined ? '' : ok ? `${cmp} ${target} ok` : `${cmp} ${target} MISSED`;
    console.log(`  ${label.padEnd(38)} ${fmtRatio(r).padEnd(20)} ${verdict}`);
  }
  return { results, checks };
}
