// @ts-check
// `npm run demo`: runs every example under examples/*/demo.mjs. For each: publish messages with
// injected duplicates, run its consumers as child processes, SIGKILL them part-way, start them
// again, and check that every unique message had exactly one effect and that the example's own
// domain invariant holds. Prints one table per broker; exits 0 only when every row holds.
//
//   node scripts/demo.mjs [--only <example>]     DEMO_MESSAGES=<unique messages per example>
//   ONCE_KAFKA_CLIENT=kafkajs|platformatic|confluent: the client library of the Kafka consumers and
//   publishers (examples/kafka-client.mjs; kafkajs by default)
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { kafkaClientName } from '../examples/kafka-client.mjs';
import { report, rowHolds } from './demo/report.mjs';
import { runExample } from './demo/run-example.mjs';

/** @typedef {import('./demo/example-contract.js').DemoExample} DemoExample */

const root = fileURLToPath(new URL('..', import.meta.url));
/** The order; any other example with a demo.mjs runs after these, by name. */
const ORDER = [
  'kafka-orders',
  'sqs-payments',
  'rabbitmq-emails',
  'nats-inventory',
  'outbox-chain',
  'http-payments',
];
const COUNT = Number(process.env.DEMO_MESSAGES ?? 2000);
const DUP_SHARE = 0.25;

function parseArgs(/** @type {string[]} */ argv) {
  /** @type {string | undefined} */
  let only;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--only' && argv[i + 1]) only = argv[++i];
    else if (argv[i]?.startsWith('--only=')) only = argv[i]?.slice('--only='.length);
    else {
      console.error(`demo: unknown argument ${argv[i]}; usage: node scripts/demo.mjs [--only <example>]`);
      process.exit(2);
    }
  }
  return { only };
}

/** @returns {string[]} example folder names that have a demo.mjs, in run order */
function discover() {
  const dir = join(root, 'examples');
  const names = readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(dir, d.name, 'demo.mjs')))
    .map((d) => d.name);
  const rank = (/** @type {string} */ n) => (ORDER.includes(n) ? ORDER.indexOf(n) : ORDER.length);
  return names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** @returns {Promise<DemoExample>} */
async function load(/** @type {string} */ name) {
  const mod = await import(pathToFileURL(join(root, 'examples', name, 'demo.mjs')).href);
  const ex = mod.default;
  if (!ex || typeof ex.prepare !== 'function' || typeof ex.broker !== 'string')
    throw new Error(`examples/${name}/demo.mjs: the default export needs name, broker and prepare()`);
  if (ex.name !== name)
    throw new Error(`examples/${name}/demo.mjs: name is '${ex.name}', expected '${name}'`);
  return ex;
}

/** Services: use the running ones or start them (scripts/services is the one way to do that). */
function services() {
  const env = spawnSync('bash', [join(root, 'scripts/services'), 'env'], { encoding: 'utf8' }).stdout ?? '';
  for (const m of env.matchAll(/^export (\w+)=(.*)$/gm))
    if (m[1] && m[2] !== undefined) process.env[m[1]] ??= m[2].replace(/^['"]|['"]$/g, '');
  const started = spawnSync('bash', [join(root, 'scripts/services'), 'start'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (started.status !== 0) {
    console.error('demo: services did not start (see above); try `npm run services start`');
    process.exit(1);
  }
}

const { only } = parseArgs(process.argv.slice(2));
const found = discover();
const names = only ? found.filter((n) => n === only) : found;
if (names.length === 0) {
  console.error(
    only
      ? `demo: no examples/${only}/demo.mjs; found: ${found.join(', ') || 'none'}`
      : 'demo: no examples/*/demo.mjs found',
  );
  process.exit(2);
}
if (!Number.isInteger(COUNT) || COUNT < 10) {
  console.error(`demo: DEMO_MESSAGES must be an integer of at least 10, got ${process.env.DEMO_MESSAGES}`);
  process.exit(2);
}
/** @type {string} */
let kafkaClient;
try {
  kafkaClient = kafkaClientName();
} catch (err) {
  console.error(`demo: ${/** @type {Error} */ (err).message}`);
  process.exit(2);
}
services();
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
// The AWS SDK warns every process on Node 20 about its releases of 2027; that is not the demo's news.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const log = (/** @type {string} */ s) => console.log(`demo: ${s}`);

log(`examples: ${names.join(', ')}; run ${run}; Kafka client: ${kafkaClient} (ONCE_KAFKA_CLIENT)`);
const rows = [];
const t0 = Date.now();
for (const name of names) {
  const example = await load(name);
  rows.push(await runExample(example, { databaseUrl, run, count: COUNT, dupShare: DUP_SHARE }, log));
}
console.log(report(rows, { count: COUNT, dupShare: DUP_SHARE }));
const ok = rows.every(rowHolds);
console.log(
  `\n${ok ? 'every row holds' : 'SOME ROWS FAIL'}; ${((Date.now() - t0) / 1000).toFixed(1)} s in all`,
);
process.exit(ok ? 0 : 1);
