#!/usr/bin/env node
// Draws docs/img/benchmarks.svg from bench/results/*.json: for each broker, once's throughput
// divided by its baseline's in the same run (per message and batched), with the target of each
// ratio as a line across its bar. Plain SVG text, no dependencies: `npm run bench:chart`.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const results = join(root, 'bench', 'results');
const out = join(root, 'docs', 'img', 'benchmarks.svg');

// The SQS program prints its ratios without targets; this one is docs/benchmarks.md's.
const SQS_TARGET = 0.9;

function read(name) {
  return JSON.parse(readFileSync(join(results, `${name}.json`), 'utf8'));
}

function need(value, what) {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new Error(`bench-chart: ${what} is missing from bench/results (run npm run bench first)`);
  }
  return value;
}

/** Core: B2/B1 per message and B3(100)/B1 batched at each concurrency. */
function coreGroups(core) {
  const concurrencies = [...new Set(core.ratios.map((r) => r.concurrency))].sort((a, b) => a - b);
  return concurrencies.map((c) => {
    const at = (label) => core.ratios.find((r) => r.concurrency === c && r.label === label);
    const msg = at('B2 / B1 per message');
    const batch = at('B3(100) / B1 batched(100)');
    return {
      label: `core c=${c}`,
      bars: [
        { kind: 'msg', value: need(msg?.ratio, `core c=${c} B2/B1`), target: msg.target },
        { kind: 'batch', value: need(batch?.ratio, `core c=${c} B3/B1`), target: batch.target },
      ],
    };
  });
}

/** Kafka and RabbitMQ name their ratios alike; Kafka calls the number `value`, RabbitMQ `measured`. */
function adapterGroup(label, data) {
  const ratio = (name) => {
    const r = data.ratios[name];
    return { value: need(r?.value ?? r?.measured, `${label} ${name}`), target: r.target };
  };
  return {
    label,
    bars: [
      { kind: 'msg', ...ratio('once/msg ÷ B1/msg') },
      { kind: 'batch', ...ratio('once/batch ÷ B1/batch') },
    ],
  };
}

/** SQS: the one-receiver variants (the default) against B1 of the same pairing. */
function sqsGroup(sqs) {
  const variant = (name) => need(sqs.results.find((r) => r.variant === name)?.vsB1, `sqs ${name}`);
  return {
    label: 'SQS (ElasticMQ)',
    bars: [
      { kind: 'msg', value: variant('once/msg, 1 receiver'), target: SQS_TARGET },
      { kind: 'batch', value: variant('once/batch, 1 receiver'), target: SQS_TARGET },
    ],
  };
}

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The chart as SVG text. */
function render(groups, note) {
  const width = 780;
  const height = 380;
  const plot = { left: 56, right: width - 16, top: 48, bottom: height - 78 };
  const values = groups.flatMap((g) => g.bars.flatMap((b) => [b.value, b.target ?? 0]));
  const yMax = Math.ceil(Math.max(1, ...values) * 5 + 0.5) / 5;
  const y = (v) => plot.bottom - (v / yMax) * (plot.bottom - plot.top);
  const groupWidth = (plot.right - plot.left) / groups.length;
  const barWidth = Math.min(34, groupWidth / 3);
  const colour = { msg: '#4c78a8', batch: '#f58518' };
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    '<title>once throughput divided by the baseline measured in the same run, per broker, with the targets</title>',
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="600">once throughput ÷ baseline in the same run (higher is better; dashes: target)</text>`,
  ];
  for (let v = 0; v <= yMax + 1e-9; v += 0.2) {
    const yy = y(v).toFixed(1);
    parts.push(
      `<line x1="${plot.left}" x2="${plot.right}" y1="${yy}" y2="${yy}" stroke="${v === 0 ? '#333' : '#e3e3e3'}"/>`,
      `<text x="${plot.left - 6}" y="${yy}" dy="4" text-anchor="end" fill="#555">${v.toFixed(1)}</text>`,
    );
  }
  groups.forEach((g, i) => {
    const centre = plot.left + groupWidth * (i + 0.5);
    g.bars.forEach((b, j) => {
      const x = centre + (j - g.bars.length / 2) * (barWidth + 4) + 2;
      const top = y(b.value);
      const met = b.target === undefined || b.target === null || b.value >= b.target;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${barWidth.toFixed(1)}" height="${(plot.bottom - top).toFixed(1)}" fill="${colour[b.kind]}"><title>${esc(`${g.label} ${b.kind === 'msg' ? 'per message' : 'batched'}: ${b.value.toFixed(2)}`)}</title></rect>`,
        `<text x="${(x + barWidth / 2).toFixed(1)}" y="${(top - 4).toFixed(1)}" text-anchor="middle" fill="${met ? '#1a7f37' : '#b42318'}">${b.value.toFixed(2)}</text>`,
      );
      if (typeof b.target === 'number') {
        const ty = y(b.target).toFixed(1);
        parts.push(
          `<line x1="${(x - 3).toFixed(1)}" x2="${(x + barWidth + 3).toFixed(1)}" y1="${ty}" y2="${ty}" stroke="#222" stroke-width="2" stroke-dasharray="4 2"/>`,
        );
      }
    });
    parts.push(
      `<text x="${centre.toFixed(1)}" y="${plot.bottom + 18}" text-anchor="middle">${esc(g.label)}</text>`,
    );
  });
  const legendY = height - 40;
  parts.push(
    `<rect x="${plot.left}" y="${legendY - 10}" width="12" height="12" fill="${colour.msg}"/>`,
    `<text x="${plot.left + 18}" y="${legendY}">a transaction per message ÷ the bare effect, per message</text>`,
    `<rect x="${plot.left + 420}" y="${legendY - 10}" width="12" height="12" fill="${colour.batch}"/>`,
    `<text x="${plot.left + 438}" y="${legendY}">batched ÷ the bare effect, batched</text>`,
    `<text x="${plot.left}" y="${height - 14}" fill="#555">${esc(note)}</text>`,
    '</svg>',
  );
  return `${parts.join('\n')}\n`;
}

const core = read('core');
const kafka = read('kafka');
const rabbitmq = read('rabbitmq');
const sqs = read('sqs');
const groups = [
  ...coreGroups(core),
  adapterGroup('Kafka', kafka),
  adapterGroup('RabbitMQ', rabbitmq),
  sqsGroup(sqs),
];
const dates = [core.at, kafka.when, rabbitmq.at, sqs.at].filter(Boolean).map((d) => d.slice(0, 10));
const note = `bench/results/*.json, ${[...new Set(dates)].join(', ')}; 2 shared vCPUs, all services on the same host (see docs/benchmarks.md)`;
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, render(groups, note));
console.log(`wrote ${out.slice(root.length + 1)}: ${groups.length} groups`);
