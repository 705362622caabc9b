// `npm run bench [-- name ...]`: runs each bench/<name>/run.mjs in turn (all by default).
// Each prints its own table with its baselines, run side by side in the same process.
// Opt-in long modes, never part of the default run: `--scale` (bench/core/scale.mjs, a
// 10-million-row inbox and its purge; about half an hour), `--shapes` (bench/core/scale-shapes.mjs,
// three inbox table shapes on a 10-million-row inbox with the floor's SQL), `--databases`
// (bench/core/databases.mjs, one inbox over 1, 4 and 16 databases against one over a single pool)
// and `--soak [broker ...]`
// (bench/soak/soak.mjs, a long run per broker measuring the consumer's memory).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const args = process.argv.slice(2);
const long = {
  '--scale': 'core/scale.mjs',
  '--shapes': 'core/scale-shapes.mjs',
  '--databases': 'core/databases.mjs',
  '--soak': 'soak/soak.mjs',
}[args[0]];
if (long) {
  console.log(`\n=== bench/${long} ===`);
  const r = spawnSync(process.execPath, [`${here}${long}`, ...args.slice(1)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
const wanted = args;
const names = readdirSync(here, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(`${here}${d.name}/run.mjs`))
  .map((d) => d.name)
  .filter((n) => wanted.length === 0 || wanted.includes(n));
let failed = 0;
for (const name of names) {
  console.log(`\n=== bench/${name} ===`);
  const r = spawnSync(process.execPath, [`${here}${name}/run.mjs`], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    console.log(`bench/${name} exited with ${r.status}`);
  }
}
process.exit(failed ? 1 : 0);
