// `npm run chaos -- --broker kafka|sqs|rabbitmq|nats|all [--injections N] [--seed S] [--short]`
//   [--max-minutes M] stops injecting after M minutes; [--outage-ms MS] [--rate PER_S] override defaults.
//   Partitions: [--partitions-only] every injection is a network partition (the long campaign);
//   [--partitions N] how many the mixed plan holds; [--partition-ms A,B,C] their lengths;
//   [--partition-mode auto|namespace|proxy]; [--bound-ms MS] the statement bound recovery is held against.
//   [--kafka-client kafkajs|platformatic|confluent] the client the once Kafka consumers run on
//   (ONCE_KAFKA_CLIENT, else kafkajs); the last two need namespace partitions (root).
//   Tenants: [--tenants] the once consumers route over three databases by key, the third on a
//   second private cluster, and the plan holds `tenant-restart`s of that cluster
//   ([--tenant-restarts N], 1 with --short, else a tenth; [--tenant-outage-ms MS], 5 000).
// `npm run chaos -- --table`: regenerate the campaign table in docs/guarantees.md from chaos/results.
// See chaos/README.md for what a run does and what it checks.
import { parseArgs } from 'node:util';
import { runBroker } from './run-broker.mjs';
import { writeTable } from './table.mjs';

const { values } = parseArgs({
  options: {
    broker: { type: 'string', default: 'all' },
    injections: { type: 'string' },
    seed: { type: 'string' },
    short: { type: 'boolean', default: false },
    table: { type: 'boolean', default: false },
    rate: { type: 'string' },
    'outage-ms': { type: 'string' },
    'max-minutes': { type: 'string' },
    'partitions-only': { type: 'boolean', default: false },
    partitions: { type: 'string' },
    'partition-ms': { type: 'string' },
    'partition-mode': { type: 'string', default: 'auto' },
    'bound-ms': { type: 'string' },
    'kafka-client': { type: 'string', default: process.env.ONCE_KAFKA_CLIENT || 'kafkajs' },
    tenants: { type: 'boolean', default: false },
    'tenant-restarts': { type: 'string' },
    'tenant-outage-ms': { type: 'string' },
  },
});

const positive = (flag, v) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    process.stderr.write(`--${flag} takes a whole number >= 0, got '${v}'\n`);
    process.exit(2);
  }
  return n;
};
if (!['auto', 'namespace', 'proxy'].includes(values['partition-mode'])) {
  process.stderr.write(
    `--partition-mode takes auto, namespace or proxy, got '${values['partition-mode']}'\n`,
  );
  process.exit(2);
}
const partitionMs = values['partition-ms']?.split(',').map((v) => positive('partition-ms', v));

if (values.table) {
  const file = writeTable();
  process.stdout.write(`wrote the campaign table in ${file}\n`);
  process.exit(0);
}

const brokers = values.broker === 'all' ? ['kafka', 'sqs', 'rabbitmq', 'nats'] : values.broker.split(',');
for (const b of brokers) {
  if (!['kafka', 'sqs', 'rabbitmq', 'nats'].includes(b)) {
    process.stderr.write(`unknown broker '${b}': use kafka, sqs, rabbitmq, nats or all\n`);
    process.exit(2);
  }
}
const seed = values.seed === undefined ? Math.floor(Math.random() * 1e6) : Number(values.seed);
const injections = Number(values.injections ?? (values.short ? 14 : 100));
const started = Date.now();
let failed = false;
const verdicts = [];
for (const broker of brokers) {
  try {
    const s = await runBroker({
      broker,
      seed,
      injections,
      short: values.short,
      ...(values.rate ? { ratePerS: Number(values.rate) } : {}),
      ...(values['outage-ms'] ? { outageMs: Number(values['outage-ms']) } : {}),
      // --short keeps all four brokers inside CI's 10 minutes: stop injecting after 100 s.
      ...(values.short ? { maxRunMs: 100_000 } : {}),
      ...(values['max-minutes'] ? { maxRunMs: Number(values['max-minutes']) * 60_000 } : {}),
      partitionsOnly: values['partitions-only'],
      partitionMode: values['partition-mode'],
      ...(values.partitions ? { partitions: positive('partitions', values.partitions) } : {}),
      ...(partitionMs ? { partitionMs } : {}),
      ...(values['bound-ms'] ? { boundMs: positive('bound-ms', values['bound-ms']) } : {}),
      kafkaClient: values['kafka-client'],
      tenants: values.tenants,
      ...(values['tenant-restarts']
        ? { tenantRestarts: positive('tenant-restarts', values['tenant-restarts']) }
        : {}),
      ...(values['tenant-outage-ms']
        ? { tenantOutageMs: positive('tenant-outage-ms', values['tenant-outage-ms']) }
        : {}),
    });
    const p = s.partitions;
    const fmtMs = (ms) => (ms === null ? '-' : `${(ms / 1000).toFixed(1)} s`);
    const inj = Object.values(s.injections);
    const counted = inj.reduce((n, k) => n + k.counted, 0);
    const total = inj.reduce((n, k) => n + k.total, 0);
    const t = s.tenants;
    const line =
      `chaos ${broker}${s.client && s.client !== 'kafkajs' ? ` (${s.client})` : ''} seed=${seed}: ${s.ok ? 'OK' : 'VIOLATION'} ` +
      `injections ${counted}/${total} counted, ids ${s.produced.distinctIds}, ` +
      `once dup ${s.once.duplicated} lost ${s.once.lost} order ${s.once.keysOutOfOrder} ` +
      `unsettled ${s.once.unsettledAtEnd} dead ${s.once.deadLetters}; ` +
      `naive dup ids ${s.naive.duplicatedIds}; ` +
      `partitions (${p.via}${p.why ? `: ${p.why}` : ''}) ` +
      (p.via === 'namespace'
        ? `${p.counted}/${p.total} counted, `
        : `${p.counted}/${p.total} with work in flight, none counted toward the goal, `) +
      `${p.recovered} recovered, recovery p99 ${fmtMs(p.recoveryP99Ms)} (statement bound ${fmtMs(p.statementBoundMs)}); ` +
      (t
        ? `tenants ${Object.values(t.databases).join('/')} effects, misplaced ${t.misplaced}, ` +
          `${t.restarts.length} restart(s) of ${t.restarted}: other tenants' commits while down ${t.restarts.map((r) => `${r.otherTenantCommits}${r.otherTenantsPromised ? '' : ' (not promised)'}`).join(',')}, ` +
          `recovery ${t.restarts.map((r) => fmtMs(r.recoveryMs)).join(',')}; `
        : '') +
      `${Math.round(s.wallMs / 1000)} s` +
      (s.ok ? '' : ` [${s.violations.join('; ')}]`);
    verdicts.push(line);
    if (!s.ok) failed = true;
  } catch (err) {
    failed = true;
    verdicts.push(`chaos ${broker} seed=${seed}: ERROR ${err?.stack ?? err}`);
  }
  process.stdout.write(`${verdicts.at(-1)}\n`);
}
process.stdout.write(
  `chaos: ${failed ? 'FAILED' : 'passed'} in ${Math.round((Date.now() - started) / 1000)} s\n`,
);
process.exit(failed ? 1 : 0);
