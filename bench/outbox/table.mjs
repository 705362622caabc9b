// Prints bench/outbox's results (or the JSON file given) as the Markdown table of docs/benchmarks.md.
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? new URL('../results/outbox.json', import.meta.url);
const { results } = JSON.parse(readFileSync(file, 'utf8'));
const variants = Object.keys(results[0].variants);
const r2 = (x) => x.toFixed(2);
console.log(
  `| broker | keys | raw msgs/s | ${variants.map((v) => `${v} ÷ raw`).join(' | ')} | sent | duplicates |`,
);
console.log(`|---|---|---|${variants.map(() => '---').join('|')}|---|---|`);
for (const r of results) {
  const cells = variants.map((v) => {
    const x = r.variants[v].ratio;
    return `${r2(x.median)} [${r2(x.min)}–${r2(x.max)}]`;
  });
  const sent = Object.values(r.variants).every((v) => v.distinctSent === r.rows)
    ? `all ${r.rows}`
    : 'MISSING';
  const dups = Object.values(r.variants).reduce((s, v) => s + v.duplicates, 0);
  console.log(
    `| ${r.broker} | ${r.keys || 'none'} | ${r.rawMsgsPerSec.toLocaleString('en')} | ${cells.join(' | ')} | ${sent} | ${dups} |`,
  );
}
