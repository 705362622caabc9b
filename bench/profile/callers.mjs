// Who calls a function, in a CPU profile: the sampled time of every node named `name` (self time
// and, with `total`, its callees' too), grouped by its chain of `depth` callers.
// Usage: node bench/profile/callers.mjs <dir-or-file> <name> [depth=3] [messages] [total]
import { readdirSync, readFileSync, statSync } from 'node:fs';

const [path, name, depthArg, msgs, mode] = process.argv.slice(2);
const depth = Number(depthArg ?? 3);
const files = statSync(path).isDirectory()
  ? readdirSync(path)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => `${path}/${f}`)
  : [path];
const by = new Map();
let all = 0;
const label = (n) => {
  const cf = n.callFrame;
  return `${cf.functionName || '(anon)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`;
};
for (const file of files) {
  const p = JSON.parse(readFileSync(file, 'utf8'));
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map();
  for (let i = 0; i < p.samples.length; i++)
    self.set(p.samples[i], (self.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  const total = new Map();
  const sum = (id) => {
    const n = nodes.get(id);
    let t = self.get(id) ?? 0;
    for (const c of n.children ?? []) t += sum(c);
    total.set(id, t);
    return t;
  };
  sum(p.nodes[0].id);
  for (const n of p.nodes) {
    if (n.callFrame.functionName !== name) continue;
    // Skip nested matches (recursion) when counting totals.
    if (mode === 'total') {
      let up = parent.get(n.id);
      let nested = false;
      while (up !== undefined) {
        if (nodes.get(up).callFrame.functionName === name) nested = true;
        up = parent.get(up);
      }
      if (nested) continue;
    }
    const t = mode === 'total' ? total.get(n.id) : (self.get(n.id) ?? 0);
    if (!t) continue;
    const chain = [];
    let up = parent.get(n.id);
    while (up !== undefined && chain.length < depth) {
      chain.push(label(nodes.get(up)));
      up = parent.get(up);
    }
    const key = chain.join(' < ');
    by.set(key, (by.get(key) ?? 0) + t);
    all += t;
  }
}
const fmt = (v) =>
  msgs ? `${(v / Number(msgs)).toFixed(2).padStart(7)} µs` : `${(v / 1000).toFixed(1).padStart(7)} ms`;
console.log(`${name}: ${fmt(all)} in all`);
for (const [k, v] of [...by].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(fmt(v), k);
