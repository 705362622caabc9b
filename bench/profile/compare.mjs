// Before/after comparison for issue #14 step 2: runs bench/profile/run.mjs once per variant and
// build, in separate processes, interleaved over COMPARE_REPS repetitions in a rotating order:
// the floor, once as built now, and once from another build (COMPARE_BEFORE: a copy of an older
// packages/core/dist/index.js). COMPARE_SCRIPT runs another harness of this folder instead of
// run.mjs (rabbitmq.mjs, kafka.mjs: COMPARE_BEFORE is then a copy of that adapter's dist/index.js,
// passed as PROFILE_BUILD). COMPARE_BUILDS=name=path,name=path runs several older builds beside
// each other (each paired with the first of them, as "before" is). Prints medians and the per-repetition paired ratios (median with
// min–max) of Node CPU µs per message and msgs/s; writes bench/results/profile.json.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fmtRatio, gitCommit, pairedRatio } from '../support/report.mjs';

const REPS = Number(process.env.COMPARE_REPS ?? 7);
const BEFORE = process.env.COMPARE_BEFORE;
const N_MSG = Number(process.env.COMPARE_N_MSG ?? 1500);
const N_BATCH = Number(process.env.COMPARE_N_BATCH ?? 4000);
const C = Number(process.env.PROFILE_CONCURRENCY ?? 4);
// Warm-up messages per shape (run.mjs's PROFILE_WARM); unset keeps run.mjs's default, min(N, 1000).
const WARM = { msg: process.env.COMPARE_WARM_MSG, batch: process.env.COMPARE_WARM_BATCH };
const SCRIPT = process.env.COMPARE_SCRIPT ?? 'run.mjs';
const script = new URL(`./${SCRIPT}`, import.meta.url).pathname;
const BEFORE_VAR = SCRIPT === 'run.mjs' ? 'PROFILE_CORE' : 'PROFILE_BUILD';

const runs = {};
// COMPARE_SHAPES=msg or batch runs one shape only. COMPARE_INBOX=1 adds the adapter harnesses'
// `inbox` variant (the floor's consumer calling core's inbox directly: core without the adapter).
const shapes = (process.env.COMPARE_SHAPES ?? 'msg,batch').split(',');
const paths = Object.fromEntries(
  (process.env.COMPARE_BUILDS ?? (BEFORE ? `before=${BEFORE}` : ''))
    .split(',')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const older = Object.keys(paths);
const builds = ['floor', ...(process.env.COMPARE_INBOX ? ['inbox'] : []), ...older, 'after'];
const variantOf = (b) => (b === 'floor' || b === 'inbox' ? b : 'once');
for (let rep = 0; rep < REPS; rep++) {
  for (const shape of shapes) {
    const order = builds.slice(rep % builds.length).concat(builds.slice(0, rep % builds.length));
    for (const b of order) {
      const env = {
        ...process.env,
        PROFILE_VARIANT: `${variantOf(b)}-${shape}`,
        PROFILE_N: String(shape === 'msg' ? N_MSG : N_BATCH),
        PROFILE_CONCURRENCY: String(C),
      };
      if (WARM[shape] !== undefined) env.PROFILE_WARM = WARM[shape];
      else delete env.PROFILE_WARM;
      if (paths[b]) env[BEFORE_VAR] = paths[b];
      else delete env[BEFORE_VAR];
      const out = execFileSync('node', [script], { env, encoding: 'utf8' });
      const r = JSON.parse(out.trim().split('\n').pop());
      const key = `${b}/${shape}`;
      if (!runs[key]) runs[key] = [];
      runs[key].push(r);
      console.log(
        `rep ${rep} ${key.padEnd(14)} ${String(r.msgsPerSec).padStart(6)} msg/s ${r.cpuUsPerMsg} µs cpu/msg (main thread ${r.mainThreadUsPerMsg}, others ${r.otherThreadsUsPerMsg}; user ${r.userUsPerMsg}, system ${r.systemUsPerMsg}) ${r.scavengesPer1k} scav/1k`,
      );
    }
  }
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = {};
for (const [k, rs] of Object.entries(runs)) {
  summary[k] = {
    msgsPerSec: med(rs.map((r) => r.msgsPerSec)),
    cpuUsPerMsg: med(rs.map((r) => r.cpuUsPerMsg)),
    mainThreadUsPerMsg: med(rs.map((r) => r.mainThreadUsPerMsg)),
    otherThreadsUsPerMsg: med(rs.map((r) => r.otherThreadsUsPerMsg)),
    scavengesPer1k: med(rs.map((r) => r.scavengesPer1k)),
  };
  console.log(
    `${k.padEnd(14)} median ${summary[k].msgsPerSec} msg/s, ${summary[k].cpuUsPerMsg} µs cpu/msg, ${summary[k].scavengesPer1k} scavenges/1k`,
  );
}
const ratios = {};
const pair = (label, a, b, field) => {
  if (!runs[a] || !runs[b]) return;
  const r = pairedRatio(runs[a], runs[b], (x) => x[field]);
  ratios[label] = r;
  console.log(`${label.padEnd(44)} ${fmtRatio(r)}`);
};
for (const shape of shapes) {
  for (const b of builds.filter((x) => x !== 'floor')) {
    if (b !== 'inbox' && builds.includes('inbox'))
      pair(`once(${b}) ÷ inbox, ${shape}, CPU µs/msg`, `${b}/${shape}`, `inbox/${shape}`, 'cpuUsPerMsg');
    pair(`once(${b}) ÷ floor, ${shape}, CPU µs/msg`, `${b}/${shape}`, `floor/${shape}`, 'cpuUsPerMsg');
    pair(
      `once(${b}) ÷ floor, ${shape}, main-thread µs/msg`,
      `${b}/${shape}`,
      `floor/${shape}`,
      'mainThreadUsPerMsg',
    );
    pair(`once(${b}) ÷ floor, ${shape}, msgs/s`, `${b}/${shape}`, `floor/${shape}`, 'msgsPerSec');
  }
  for (const b of [...older.slice(1), 'after'].filter(() => older.length > 0)) {
    const a = older[0];
    pair(`${b} ÷ ${a}, ${shape}, CPU µs/msg`, `${b}/${shape}`, `${a}/${shape}`, 'cpuUsPerMsg');
    pair(`${b} ÷ ${a}, ${shape}, main-thread µs/msg`, `${b}/${shape}`, `${a}/${shape}`, 'mainThreadUsPerMsg');
    pair(`${b} ÷ ${a}, ${shape}, msgs/s`, `${b}/${shape}`, `${a}/${shape}`, 'msgsPerSec');
  }
}
writeFileSync(
  new URL(process.env.COMPARE_OUT ?? '../results/profile.json', import.meta.url),
  `${JSON.stringify({ commit: gitCommit(), script: SCRIPT, reps: REPS, concurrency: C, nMsg: N_MSG, nBatch: N_BATCH, warm: WARM, summary, ratios, runs }, null, 2)}\n`,
);
