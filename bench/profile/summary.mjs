import { readdirSync, readFileSync } from 'node:fs';

const dir = process.argv[2];
const top = Number(process.argv[3] ?? 40);
// With a message count, shares are printed as µs of sampled time per message instead of %.
const perMsg = process.argv[4] ? Number(process.argv[4]) : undefined;
const fmt = (v) =>
  perMsg ? `${(v / perMsg).toFixed(1).padStart(6)} µs` : `${((v / total) * 100).toFixed(1).padStart(5)} %`;
const byFn = new Map(),
  byFile = new Map();
let total = 0;
for (const f of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  const p = JSON.parse(readFileSync(`${dir}/${f}`, 'utf8'));
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const dt = new Map();
  for (let i = 0; i < p.samples.length; i++)
    dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  for (const [id, us] of dt) {
    const n = nodes.get(id);
    const cf = n.callFrame;
    const file = cf.url.replace(/^file:\/\/.*?\/(node_modules|packages)\//, '$1/').replace(/^node:/, 'node:');
    const key = `${cf.functionName || '(anon)'} ${file.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`;
    byFn.set(key, (byFn.get(key) ?? 0) + us);
    let fk = file.startsWith('node_modules/') ? file.split('/').slice(0, 2).join('/') : file;
    if (fk.startsWith('packages/')) fk = fk.replace(/\/dist\//, '/');
    byFile.set(fk || cf.functionName, (byFile.get(fk || cf.functionName) ?? 0) + us);
    total += us;
  }
}
console.log('total ms', (total / 1000).toFixed(0));
for (const [k, v] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(fmt(v), k);
console.log('--- by file');
for (const [k, v] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(fmt(v), k);
