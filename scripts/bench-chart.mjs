#!/usr/bin/env node
// Draws docs/img/benchmarks.svg from bench/results/*.json. Top panel: once's throughput divided by
// the floor's (the same consumer written by hand with the same guarantee) beside once's divided by
// the bare effect's (B1), per message and batched, for core at c = 1, 4, 16 and each broker whose
// JSON is there. Bottom panel, when the JSONs carry Node CPU µs per message: once ÷ floor CPU.
// Every figure is the median of per-repetition paired ratios (bench/support/report.mjs), read from
// the JSON or, if only the repetitions are there, computed from them. A missing file, bench or
// ratio is skipped and named on stdout: the lead regenerates the JSONs one bench at a time.
// Plain SVG text, no dependencies: `npm run bench:chart`.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pairedRatio } from '../bench/support/report.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const results = join(root, 'bench', 'results');
const out = join(root, 'docs', 'img', 'benchmarks.svg');

// The targets of issue #14, fixed here rather than read from each JSON so that an older JSON
// written before a target moved is still judged against today's. once ÷ bare keeps the targets it
// had before the floor existed (SQS's is docs/benchmarks.md's ≥ 0.9).
const TARGET = {
  floor: { core: 0.95, adapter: 0.9 },
  cpu: 1.15,
  bare: {
    core: { msg: 0.75, batch: 0.8 },
    adapter: { msg: 0.75, batch: 0.8 },
    sqs: { msg: 0.9, batch: 0.9 },
  },
};

const skipped = [];
const skip = (what) => skipped.push(what);

function read(name) {
  const file = join(results, `${name}.json`);
  if (!existsSync(file)) {
    skip(`bench/results/${name}.json (no file)`);
    return undefined;
  }
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    skip(`bench/results/${name}.json (${err.message})`);
    return undefined;
  }
}

const finite = (v) => typeof v === 'number' && Number.isFinite(v);

/** { value, min, max } from a stored ratio however the bench named its fields, or undefined. */
function stored(r) {
  const value = [r?.ratio, r?.measured, r?.median, r?.value].find(finite);
  return value === undefined ? undefined : { value, min: r.min, max: r.max };
}

/** A paired ratio computed from two runs' repetition arrays, or undefined. */
function fromReps(a, b, measure) {
  const key = measure === 'cpu' ? ['repCpuUsPerMsg'] : ['repMsgsPerSec', 'reps'];
  const reps = (run) => key.map((k) => run?.[k]).find((v) => Array.isArray(v) && v.length);
  const as = reps(a);
  const bs = reps(b);
  if (!as || !bs) return undefined;
  const r = pairedRatio(as, bs, (x) => x);
  return r && finite(r.median) ? { value: r.median, min: r.min, max: r.max } : undefined;
}

/** A bar, or nothing (and a line on stdout) when neither the ratio nor its repetitions are there. */
function bar(what, kind, vs, found, target) {
  if (!found) {
    skip(what);
    return [];
  }
  return [{ what, kind, vs, ...found, target }];
}

/** Core at each concurrency: B2 and B3(100) against F and B1, clean runs. */
function coreGroups(core) {
  if (!Array.isArray(core?.ratios) && !Array.isArray(core?.results)) {
    if (core) skip('core (no ratios or results in core.json)');
    return [];
  }
  const ratios = (core.ratios ?? []).filter((r) => (r.mode ?? 'clean') === 'clean');
  const runs = (core.results ?? []).filter((r) => (r.mode ?? 'clean') === 'clean');
  const concurrencies = [...new Set([...ratios, ...runs].map((r) => r.concurrency).filter(finite))].sort(
    (a, b) => a - b,
  );
  return concurrencies.map((c) => {
    const label = (l) => stored(ratios.find((r) => r.concurrency === c && r.label === l));
    const run = (v) => runs.find((r) => r.concurrency === c && r.variant === v);
    const get = (l, a, b, measure) => label(l) ?? fromReps(run(a), run(b), measure);
    const name = `core c=${c}`;
    return {
      label: name,
      rate: [
        ...bar(
          `${name} B2 ÷ F`,
          'msg',
          'floor',
          get('B2 / F (floor) per message', 'B2 once/msg', 'F floor/msg'),
          TARGET.floor.core,
        ),
        ...bar(
          `${name} B2 ÷ B1`,
          'msg',
          'bare',
          get('B2 / B1 per message', 'B2 once/msg', 'B1 bare/msg'),
          TARGET.bare.core.msg,
        ),
        ...bar(
          `${name} B3(100) ÷ F(100)`,
          'batch',
          'floor',
          get('B3(100) / F (floor) batched(100)', 'B3 once/batch100', 'F floor/batch100'),
          TARGET.floor.core,
        ),
        ...bar(
          `${name} B3(100) ÷ B1(100)`,
          'batch',
          'bare',
          get('B3(100) / B1 batched(100)', 'B3 once/batch100', 'B1 bare/batch100'),
          TARGET.bare.core.batch,
        ),
      ],
      cpu: [
        ...bar(
          `${name} B2 ÷ F CPU`,
          'msg',
          'floor',
          get('B2 / F CPU µs per message', 'B2 once/msg', 'F floor/msg', 'cpu'),
          TARGET.cpu,
        ),
        ...bar(
          `${name} B3(100) ÷ F(100) CPU`,
          'batch',
          'floor',
          get('B3(100) / F(100) CPU µs per message', 'B3 once/batch100', 'F floor/batch100', 'cpu'),
          TARGET.cpu,
        ),
      ],
    };
  });
}

/**
 * Kafka, RabbitMQ and NATS name their ratios alike ('once/msg ÷ floor/msg'); their runs are an
 * array with `variant` (RabbitMQ, NATS) or an object keyed by name (Kafka).
 */
/** A result of the clean stream (results written before the faults stream have no `mode`). */
const isClean = (r) => (r?.mode ?? 'clean') === 'clean';

function adapterGroup(label, data) {
  if (!data) return undefined;
  // Since the faults stream, results carry a `mode` and ratios are keyed by it: chart the clean one.
  // The Kafka bench runs each client library (issue #30); its ratios are keyed by client, and the
  // chart shows kafkajs's. Results without a `client` (every other bench, older Kafka runs) count.
  const ofKafkajs = (r) => r.client === undefined || r.client === 'kafkajs';
  const runs = Array.isArray(data.results)
    ? Object.fromEntries(data.results.filter((r) => isClean(r) && ofKafkajs(r)).map((r) => [r.variant, r]))
    : (data.results ?? {});
  const clean = data.ratios?.clean ?? data.ratios;
  const ratios = clean?.kafkajs ?? clean;
  const get = (a, b, measure) =>
    stored(ratios?.[`${a} ÷ ${b}${measure === 'cpu' ? ', CPU µs/msg' : ''}`]) ??
    fromReps(runs[a], runs[b], measure);
  return {
    label,
    rate: [
      ...bar(
        `${label} once/msg ÷ floor/msg`,
        'msg',
        'floor',
        get('once/msg', 'floor/msg'),
        TARGET.floor.adapter,
      ),
      ...bar(`${label} once/msg ÷ B1/msg`, 'msg', 'bare', get('once/msg', 'B1/msg'), TARGET.bare.adapter.msg),
      ...bar(
        `${label} once/batch ÷ floor/batch`,
        'batch',
        'floor',
        get('once/batch', 'floor/batch'),
        TARGET.floor.adapter,
      ),
      ...bar(
        `${label} once/batch ÷ B1/batch`,
        'batch',
        'bare',
        get('once/batch', 'B1/batch'),
        TARGET.bare.adapter.batch,
      ),
    ],
    cpu: [
      ...bar(
        `${label} once/msg ÷ floor/msg CPU`,
        'msg',
        'floor',
        get('once/msg', 'floor/msg', 'cpu'),
        TARGET.cpu,
      ),
      ...bar(
        `${label} once/batch ÷ floor/batch CPU`,
        'batch',
        'floor',
        get('once/batch', 'floor/batch', 'cpu'),
        TARGET.cpu,
      ),
    ],
  };
}

/** SQS: the one-receiver variants (the default), whose rows carry vsFloor, cpuVsFloor and vsB1. */
function sqsGroup(sqs) {
  if (!sqs) return undefined;
  const rows = Array.isArray(sqs.results) ? sqs.results.filter(isClean) : [];
  const row = (v) => rows.find((r) => r.variant === v);
  const once = { msg: 'once/msg, 1 receiver', batch: 'once/batch, 1 receiver' };
  const floor = { msg: 'floor/msg', batch: 'floor/batch' };
  const bare = { msg: 'B1 no-dedup/msg', batch: 'B1 no-dedup/batch' };
  const get = (kind, vs, measure) => {
    const r = row(once[kind]);
    if (vs === 'bare') {
      const range = Array.isArray(r?.vsB1Range) ? r.vsB1Range : [];
      return finite(r?.vsB1)
        ? { value: r.vsB1, min: range[0], max: range[1] }
        : fromReps(r, row(bare[kind]), measure);
    }
    return stored(measure === 'cpu' ? r?.cpuVsFloor : r?.vsFloor) ?? fromReps(r, row(floor[kind]), measure);
  };
  const label = 'SQS (ElasticMQ)';
  return {
    label,
    rate: [
      ...bar(`${label} once/msg ÷ floor/msg`, 'msg', 'floor', get('msg', 'floor'), TARGET.floor.adapter),
      ...bar(`${label} once/msg ÷ B1/msg`, 'msg', 'bare', get('msg', 'bare'), TARGET.bare.sqs.msg),
      ...bar(
        `${label} once/batch ÷ floor/batch`,
        'batch',
        'floor',
        get('batch', 'floor'),
        TARGET.floor.adapter,
      ),
      ...bar(`${label} once/batch ÷ B1/batch`, 'batch', 'bare', get('batch', 'bare'), TARGET.bare.sqs.batch),
    ],
    cpu: [
      ...bar(`${label} once/msg ÷ floor/msg CPU`, 'msg', 'floor', get('msg', 'floor', 'cpu'), TARGET.cpu),
      ...bar(
        `${label} once/batch ÷ floor/batch CPU`,
        'batch',
        'floor',
        get('batch', 'floor', 'cpu'),
        TARGET.cpu,
      ),
    ],
  };
}

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const COLOUR = {
  'msg floor': '#1f4e79',
  'msg bare': '#8fb3d9',
  'batch floor': '#b35806',
  'batch bare': '#f8b878',
};
const NAME = {
  'msg floor': 'per message ÷ floor',
  'msg bare': 'per message ÷ bare (B1)',
  'batch floor': 'batched ÷ floor',
  'batch bare': 'batched ÷ bare (B1)',
};

/**
 * One panel of bars at `top`, `height` high: groups along x, a bar per ratio with its value above
 * it (green if it meets its target, red if not) and a dashed line at its target.
 */
function panel(parts, { groups, key, top, height, width, title, cmp }) {
  const plot = { left: 56, right: width - 16, top: top + 30, bottom: top + height - 24 };
  const all = groups.flatMap((g) => g[key]);
  const yMax = Math.ceil(Math.max(1.2, ...all.flatMap((b) => [b.value, b.target ?? 0])) * 5 + 0.5) / 5;
  const y = (v) => plot.bottom - (v / yMax) * (plot.bottom - plot.top);
  const groupWidth = (plot.right - plot.left) / groups.length;
  const most = Math.max(...groups.map((g) => g[key].length));
  const barWidth = Math.min(30, (groupWidth - 16) / most - 3);
  parts.push(
    `<text x="${width / 2}" y="${top + 16}" text-anchor="middle" font-size="14" font-weight="600">${esc(title)}</text>`,
  );
  const step = yMax > 2.4 ? 0.5 : 0.2;
  for (let v = 0; v <= yMax + 1e-9; v += step) {
    const yy = y(v).toFixed(1);
    parts.push(
      `<line x1="${plot.left}" x2="${plot.right}" y1="${yy}" y2="${yy}" stroke="${v === 0 ? '#333' : '#e3e3e3'}"/>`,
      `<text x="${plot.left - 6}" y="${yy}" dy="4" text-anchor="end" fill="#555">${v.toFixed(1)}</text>`,
    );
  }
  groups.forEach((g, i) => {
    const centre = plot.left + groupWidth * (i + 0.5);
    const bars = g[key];
    bars.forEach((b, j) => {
      const x = centre + (j - bars.length / 2) * (barWidth + 3) + 1.5;
      const top = y(b.value);
      const met = !finite(b.target) || (cmp === '≤' ? b.value <= b.target : b.value >= b.target);
      const range = finite(b.min) && finite(b.max) ? ` [${b.min.toFixed(2)}–${b.max.toFixed(2)}]` : '';
      const target = finite(b.target) ? `, target ${cmp} ${b.target}` : '';
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${barWidth.toFixed(1)}" height="${(plot.bottom - top).toFixed(1)}" fill="${COLOUR[`${b.kind} ${b.vs}`]}"><title>${esc(`${b.what}: ${b.value.toFixed(2)}${range}${target}`)}</title></rect>`,
        `<text x="${(x + barWidth / 2).toFixed(1)}" y="${(top - 4).toFixed(1)}" text-anchor="middle" font-size="10" fill="${met ? '#1a7f37' : '#b42318'}">${b.value.toFixed(2)}</text>`,
      );
      if (finite(b.target)) {
        const ty = y(b.target).toFixed(1);
        parts.push(
          `<line x1="${(x - 2).toFixed(1)}" x2="${(x + barWidth + 2).toFixed(1)}" y1="${ty}" y2="${ty}" stroke="#222" stroke-width="2" stroke-dasharray="4 2"/>`,
        );
      }
    });
    parts.push(
      `<text x="${centre.toFixed(1)}" y="${plot.bottom + 16}" text-anchor="middle">${esc(g.label)}</text>`,
    );
  });
}

/** The chart as SVG text: the throughput panel, then the CPU panel if any group has CPU bars. */
function render(groups, note) {
  const width = 960;
  const rateHeight = 330;
  const cpuGroups = groups.filter((g) => g.cpu.length);
  const cpuHeight = cpuGroups.length ? 260 : 0;
  const legendTop = rateHeight + cpuHeight + 8;
  const height = legendTop + 56;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    '<title>once throughput divided by the floor and by the bare effect measured in the same run, and once CPU per message divided by the floor, per bench, with the targets</title>',
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
  ];
  panel(parts, {
    groups: groups.filter((g) => g.rate.length),
    key: 'rate',
    top: 0,
    height: rateHeight,
    width,
    title: 'once msgs/s ÷ floor and ÷ bare effect, same run (higher is better; dashes: target)',
    cmp: '≥',
  });
  if (cpuGroups.length) {
    panel(parts, {
      groups: cpuGroups,
      key: 'cpu',
      top: rateHeight,
      height: cpuHeight,
      width,
      title: 'once Node CPU µs per message ÷ floor, same run (lower is better; dashes: target ≤ 1.15)',
      cmp: '≤',
    });
  }
  const keys = Object.keys(COLOUR);
  keys.forEach((k, i) => {
    const x = 56 + i * 220;
    parts.push(
      `<rect x="${x}" y="${legendTop}" width="12" height="12" fill="${COLOUR[k]}"/>`,
      `<text x="${x + 18}" y="${legendTop + 10}">${esc(NAME[k])}</text>`,
    );
  });
  parts.push(`<text x="56" y="${legendTop + 36}" fill="#555">${esc(note)}</text>`, '</svg>');
  return `${parts.join('\n')}\n`;
}

const core = read('core');
const kafka = read('kafka');
const rabbitmq = read('rabbitmq');
const sqs = read('sqs');
const nats = read('nats');
const groups = [
  ...coreGroups(core),
  adapterGroup('Kafka', kafka),
  adapterGroup('RabbitMQ', rabbitmq),
  sqsGroup(sqs),
  adapterGroup('NATS', nats),
].filter((g) => g && (g.rate.length || g.cpu.length));
for (const s of skipped) console.log(`skipped: ${s}`);
if (!groups.length) {
  console.log('bench-chart: no ratios in bench/results (run npm run bench first); chart left as it was');
  process.exit(1);
}
const dates = [core?.at, kafka?.when ?? kafka?.at, rabbitmq?.at, sqs?.at, nats?.at]
  .filter((d) => typeof d === 'string')
  .map((d) => d.slice(0, 10));
const note = `median of per-repetition paired ratios; bench/results/*.json, ${[...new Set(dates)].join(', ')}; 2 shared vCPUs, all services on the same host (see docs/benchmarks.md)`;
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, render(groups, note));
const bars = groups.reduce((n, g) => n + g.rate.length + g.cpu.length, 0);
console.log(`wrote ${out.slice(root.length + 1)}: ${groups.length} groups, ${bars} bars`);
