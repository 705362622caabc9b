// One campaign run against one broker: a private PostgreSQL, once consumers and a naive control
// as child processes, a producer with re-sent ids, seeded fault injections, and the ledger check.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { brokerSide, KAFKA_CLIENTS, KAFKA_PARTITIONS, proxyTarget } from './brokers.mjs';
import { ConsumerChild } from './children.mjs';
import { onExit } from './exit-cleanup.mjs';
import { jsonText } from './json-text.mjs';
import { NatsServer } from './nats-server.mjs';
import { compactRecord, partitionReport } from './partition-report.mjs';
import { openPartitions, PARTITION_TARGETS } from './partitions.mjs';
import { PgCluster } from './pg-cluster.mjs';
import { planInjections, rng } from './plan.mjs';
import { SLOTS, wireSlots } from './slots.mjs';
import { ROOT, testSupport } from './support.mjs';
import {
  misplacedEffects,
  otherTenantCommits,
  otherTenantsPromised,
  RESTARTED_TENANT,
  TENANTS,
  tenantOfKey,
} from './tenants.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RESULTS = join(ROOT, 'chaos', 'results');

/** How long a zombie stays stopped: past the session (Kafka 6 s), visibility (SQS 3 s) or heartbeat (AMQP 5 s, closed after 2 missed). */
const ZOMBIE_MS = { kafka: 8_000, sqs: 6_000, rabbitmq: 13_000, nats: 8_000 };
const KEYS = 12;
const RESEND_SHARE = 0.2;
/** How long a partition's recovery is waited for after the heal: TCP's retransmission backoff tops out at 2 min. */
const PARTITION_RECOVERY_WAIT_MS = 240_000;
/**
 * Partition lengths: shorter than every broker's session, visibility or heartbeat timeout here
 * (SQS visibility 3 s), longer than all of them (RabbitMQ closes after 2 missed 5 s heartbeats),
 * and longer than once's statement bound (`statementTimeoutMs`, 30 s by default).
 */
export const PARTITION_MS = Object.freeze([2_000, 15_000, 45_000]);
/** The short CI run: one length, past every broker's timeout. */
export const SHORT_PARTITION_MS = Object.freeze([12_000]);
/**
 * once's own bound on a statement (the inbox's `statementTimeoutMs` default, 30 s, as
 * `InboxOptions` documents it; the defaults object is no longer public), the figure a
 * partition's recovery is reported against.
 */
export const STATEMENT_BOUND_MS = 30_000;
/** How long the tenant database's cluster stays down in a `tenant-restart` (a crash, then start). */
export const TENANT_OUTAGE_MS = 5_000;

/**
 * @param {{ broker: string, seed: number, injections: number, short: boolean, ratePerS?: number,
 *   outageMs?: number, maxRunMs?: number, log?: (s: string) => void,
 *   partitions?: number, partitionsOnly?: boolean, partitionMode?: 'auto'|'namespace'|'proxy',
 *   partitionMs?: number[], boundMs?: number, kafkaClient?: string, tenants?: boolean,
 *   tenantRestarts?: number, tenantOutageMs?: number }} o
 * `partitions`: how many the mixed plan holds (1 with `short`, else a tenth of the injections);
 * `partitionsOnly`: every injection is a partition. `kafkaClient`: the client library the once
 * consumers run on (kafkajs by default; the others need namespaces, see slots.mjs). `tenants`: the
 * once consumers route over three databases by key (tenants.mjs), the third on a second cluster;
 * the plan holds `tenantRestarts` crash restarts of that cluster (1 with `short`, else a tenth),
 * each down for `tenantOutageMs`.
 */
export async function runBroker(o) {
  const cleanups = [];
  try {
    return await run(o, cleanups);
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}

async function run(o, cleanups) {
  const log = o.log ?? ((s) => process.stderr.write(`[${o.broker}] ${s}\n`));
  const started = Date.now();
  const random = rng(o.seed);
  const { FaultProxy, checkEffects } = await testSupport();
  const name = `chaos-${o.broker}-${o.seed}-${Date.now().toString(36)}`;
  const outageMs = o.outageMs ?? (o.short ? 10_000 : 60_000);
  const ratePerS = o.ratePerS ?? 25;
  const partitionMs = o.partitionMs ?? (o.short ? SHORT_PARTITION_MS : PARTITION_MS);
  const boundMs = o.boundMs ?? STATEMENT_BOUND_MS;

  const kafkaClient = o.kafkaClient ?? 'kafkajs';
  if (!KAFKA_CLIENTS.includes(kafkaClient))
    throw new Error(`kafka client '${kafkaClient}' is not one of ${KAFKA_CLIENTS.join(', ')}`);

  // ---- partitions, PostgreSQL, broker, proxies ----
  // Namespaces first: PostgreSQL listens on their veths' root ends.
  const partitions = await openPartitions({ slots: SLOTS, mode: o.partitionMode, log });
  cleanups.push(() => partitions.close());
  if (o.broker === 'kafka' && kafkaClient !== 'kafkajs' && partitions.via !== 'namespace')
    throw new Error(
      `the ${kafkaClient} client has no socket hook: its connections can be cut only from network namespaces (run as root; ${partitions.why})`,
    );
  log(
    `partitions: ${partitions.via}${partitions.via === 'proxy' ? ` (stand-in: ${partitions.why}; not counted toward the goal)` : ''}`,
  );
  const cluster = await PgCluster.create(
    join(ROOT, '.cache', 'chaos'),
    `pg-${o.broker}-${o.seed}`,
    partitions.pgListen,
  );
  const offCluster = onExit(() => cluster.stopSync());
  cleanups.push(async () => {
    offCluster();
    await cluster.destroy();
  });
  const pool = new pg.Pool({ connectionString: cluster.url, max: 3, application_name: 'chaos-campaign' });
  pool.on('error', () => {});
  cleanups.push(() => pool.end());
  const { migrate } = await import('@once/core');
  const effectsTable = (p, t) =>
    p.query(`CREATE TABLE IF NOT EXISTS public.${t} (
      seq bigserial PRIMARY KEY, message_id text NOT NULL, key text NOT NULL, payload text NOT NULL,
      at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  await migrate(pool, { schema: 'once' });
  for (const t of ['effects', 'naive_effects']) await effectsTable(pool, t);
  // --tenants: tenant_0 and tenant_1 are databases of this cluster, tenant_2 of a second one
  // (the one `tenant-restart` crashes), each with once's schema and an effects table of its own.
  const tenantOutageMs = o.tenantOutageMs ?? TENANT_OUTAGE_MS;
  let tenantCluster;
  /** tenant -> { cluster, pool } (the campaign's own connections). */
  const tenantDbs = new Map();
  if (o.tenants) {
    tenantCluster = await PgCluster.create(
      join(ROOT, '.cache', 'chaos'),
      `pg-${o.broker}-${o.seed}-tenant`,
      partitions.pgListen,
    );
    const offTenant = onExit(() => tenantCluster.stopSync());
    cleanups.push(async () => {
      offTenant();
      await tenantCluster.destroy();
    });
    for (const t of TENANTS) {
      const c = t === RESTARTED_TENANT ? tenantCluster : cluster;
      const admin = new pg.Pool({ connectionString: c.url, max: 1 });
      await admin.query(`CREATE DATABASE ${t}`);
      await admin.end();
      const url = new URL(c.url);
      url.pathname = `/${t}`;
      const p = new pg.Pool({ connectionString: url.toString(), max: 2, application_name: 'chaos-campaign' });
      p.on('error', () => {});
      cleanups.push(() => p.end());
      await migrate(p, { schema: 'once' });
      await effectsTable(p, 'effects');
      tenantDbs.set(t, { cluster: c, pool: p });
    }
    log(
      `tenants: ${TENANTS.join(', ')} by key; ${RESTARTED_TENANT} on a second cluster (port ${tenantCluster.port})`,
    );
  }
  // NATS runs on a server of the run's own (never the shared one): the campaign stops it.
  const natsServer =
    o.broker === 'nats'
      ? await NatsServer.create(join(ROOT, '.cache', 'chaos'), `nats-${o.seed}`)
      : undefined;
  if (natsServer) {
    const offNats = onExit(() => natsServer.killSync());
    cleanups.push(async () => {
      offNats();
      await natsServer.destroy();
    });
  }
  const side = await brokerSide(o.broker, name, natsServer?.url);
  cleanups.push(() => side.close());
  // One fault proxy per slot, bound where that slot's children can reach it.
  const target = proxyTarget(o.broker, natsServer?.url);
  const wired = await wireSlots({
    partitions,
    FaultProxy,
    target,
    pgPort: cluster.port,
    // Kafka clients without a socket hook follow the broker's metadata to its own address.
    ...(o.broker === 'kafka' && partitions.via === 'namespace' ? { advertised: target } : {}),
  });
  cleanups.push(() => wired.close());
  /** The slot's URL of each tenant database: the slot's PostgreSQL address, the tenant's cluster port. */
  const tenantUrls = (databaseUrl) =>
    TENANTS.map((t) => {
      const url = new URL(databaseUrl);
      url.pathname = `/${t}`;
      // The second cluster is reached directly (its port is not behind the slot's dark gate, and
      // partitions cut only the first cluster's port): `tenant-restart` is its fault.
      if (tenantDbs.get(t).cluster === tenantCluster) url.port = String(tenantCluster.port);
      return { name: t, url: url.toString() };
    });
  const configOf = (mode, slot) => ({
    broker: o.broker,
    schema: 'once',
    effectsTable: mode === 'once' ? 'public.effects' : 'public.naive_effects',
    handlerDelayMs: 10,
    // The naive control is a plain kafkajs consumer whichever client once runs on.
    ...(o.broker === 'kafka' && mode === 'once' ? { kafkaClient } : {}),
    ...wired.endpoints.get(slot),
    ...(o.tenants && mode === 'once' ? { tenants: tenantUrls(wired.endpoints.get(slot).databaseUrl) } : {}),
    ...side.childSettings(mode),
  });

  // ---- what is in flight, what settled ----
  const keyOf = new Map(); // id -> key
  const unitOfId = (id) => (o.broker === 'sqs' ? `g:${keyOf.get(id)}` : 'q');
  const lastSettle = new Map(); // unit -> ms
  // id -> when its settle happened, on the child's clock (a line is read some ms after it was
  // written): a partition counts only for work that had not settled before its rules were in.
  const settledAt = new Map();
  const markSettled = (id, ts) => {
    settledAt.delete(id);
    settledAt.set(id, ts);
    if (settledAt.size > 20_000) settledAt.delete(settledAt.keys().next().value);
  };
  const waiters = new Set();
  let settles = 0;
  // --tenants: commits seen while a tenant-restart is down (`{ tenant, at }`), and each tenant's last commit.
  let outageCommits;
  const lastCommitOfTenant = new Map();
  /** tenant -> the units (Kafka partitions) its messages were claimed on. */
  const unitsOfTenant = new Map();
  const onLine = (child, msg, at) => {
    if (child.mode !== 'once') return;
    if (msg.t === 'start-failed') startFailures++;
    if (o.tenants && msg.t === 'commit') {
      const tenant = msg.tenant ?? tenantOfKey(keyOf.get(msg.id));
      const ts = msg.ts ?? at;
      lastCommitOfTenant.set(tenant, Math.max(lastCommitOfTenant.get(tenant) ?? 0, ts));
      outageCommits?.push({ tenant, at: ts });
    }
    if (o.tenants && msg.t === 'claim' && keyOf.has(msg.id)) {
      const tenant = tenantOfKey(keyOf.get(msg.id));
      if (!unitsOfTenant.has(tenant)) unitsOfTenant.set(tenant, new Set());
      unitsOfTenant.get(tenant).add(msg.unit);
    }
    if (msg.t === 'claim') {
      // A claim elsewhere means the message moved (a rolled-back attempt, a redelivery).
      for (const c of allOnce()) c.inflight.delete(msg.id);
      child.inflight.set(msg.id, { unit: msg.unit, offset: msg.offset, phase: 'claimed', at });
    } else if (msg.t === 'commit') {
      const f = child.inflight.get(msg.id);
      if (f) f.phase = 'committed';
    } else if (msg.t === 'settle') {
      settles++;
      const units = new Set();
      const ts = msg.ts ?? at;
      if (msg.upTo !== undefined) {
        units.add(msg.unit);
        for (const c of allOnce()) {
          for (const [id, f] of c.inflight) {
            if (f.unit === msg.unit && BigInt(f.offset) <= BigInt(msg.upTo)) {
              c.inflight.delete(id);
              markSettled(id, ts);
            }
          }
        }
      } else {
        for (const id of msg.ids ?? []) {
          units.add(child.inflight.get(id)?.unit ?? unitOfId(id));
          for (const c of allOnce()) c.inflight.delete(id);
          markSettled(id, ts);
        }
      }
      // A killed run's last lines are read after the kill: they settled before it, not after.
      if (!child.dead) for (const u of units) lastSettle.set(u, at);
      for (const w of waiters) w();
    }
  };
  const incidents = [];
  let startFailures = 0;
  let consumers = [];
  let joiner;
  const allOnce = () => [...consumers, joiner].filter(Boolean);
  const onUnexpectedExit = (child, incident) => {
    incidents.push({ child: child.name, mode: child.mode, ...incident });
    // The naive control exits on any error by design (restarted): only once's exits are news.
    if (child.mode === 'once' && incident.code !== 6)
      log(
        `${child.name} exited unexpectedly (${incident.code ?? incident.signal}); restarting\n${incident.stderrTail.split('\n').slice(-6).join('\n')}`,
      );
    setTimeout(() => {
      if (!stopping && !child.running && !child.parked) child.start();
    }, 500);
  };
  let stopping = false;
  // Each child's stderr (once's warnings and errors), kept until the next run of this broker.
  const logDir = join(ROOT, '.cache', 'chaos', 'logs', o.broker);
  rmSync(logDir, { recursive: true, force: true });
  mkdirSync(logDir, { recursive: true });
  const make = (n, mode) =>
    new ConsumerChild({
      name: n,
      mode,
      config: configOf(mode, n),
      wrap: partitions.wrap(n),
      logFile: join(logDir, `${n}.log`),
      onLine,
      onUnexpectedExit,
    });
  consumers = [make('once-1', 'once').start(), make('once-2', 'once').start()];
  joiner = make('once-3', 'once');
  joiner.parked = true;
  const naive = make('naive', 'naive').start();
  const offChildren = onExit(() => {
    for (const c of [...allOnce(), naive]) c.signal('SIGKILL');
  });
  cleanups.push(async () => {
    stopping = true;
    offChildren();
    await Promise.all([...allOnce(), naive].map((c) => c.kill()));
  });
  const live = () => [...consumers, joiner].filter((c) => c.running && !c.parked);

  // ---- producer: a stream with re-sent ids, keyed ----
  const sent = []; // distinct ids in first-send order
  let published = 0;
  let producing = true;
  const seqOfKey = new Array(KEYS).fill(0);
  const bodies = new Map();
  const messageOf = (id) => ({ id, key: keyOf.get(id), body: bodies.get(id) });
  const producer = (async () => {
    let n = 0;
    const tickMs = 200;
    const perTick = Math.max(1, Math.round((ratePerS * tickMs) / 1000));
    // A batch whose publish failed is sent again as it was (its new ids are already in `sent`),
    // before anything new, and before the producer stops.
    let batch = [];
    while (producing || batch.length > 0) {
      const fresh = batch.length === 0;
      for (let i = 0; fresh && i < perTick; i++) {
        if (sent.length > 10 && random() < RESEND_SHARE) {
          const id = sent[Math.floor(random() * sent.length)];
          batch.push(messageOf(id));
          continue;
        }
        const k = Math.floor(random() * KEYS);
        const id = `${name}-m${n++}`;
        const body = JSON.stringify({ key: `k${k}`, seq: seqOfKey[k]++ });
        keyOf.set(id, `k${k}`);
        bodies.set(id, body);
        sent.push(id);
        batch.push(messageOf(id));
      }
      try {
        await side.publish(batch);
        published += batch.length;
        batch = [];
      } catch (err) {
        log(`publish failed (${err.message}); retrying the same batch`);
        await sleep(500);
        continue;
      }
      await sleep(tickMs);
    }
  })();
  // Let every consumer come up and work before the first fault.
  const upBy = Date.now() + 60_000;
  while (!(consumers.every((c) => c.ready) && naive.ready && settles > 5) && Date.now() < upBy)
    await sleep(200);
  if (Date.now() >= upBy) throw new Error(`consumers did not come up: ${consumers.map((c) => c.ready)}`);
  log(`consumers up in ${Date.now() - started} ms; injecting ${o.injections}`);

  // ---- injections ----
  const plan = planInjections(o.injections, random, {
    brokerStop: o.broker === 'nats' && !o.partitionsOnly,
    partitions: o.partitionsOnly
      ? 'only'
      : (o.partitions ?? (o.short ? 1 : Math.max(1, Math.round(o.injections / 10)))),
    tenantRestarts:
      o.tenants && !o.partitionsOnly
        ? (o.tenantRestarts ?? (o.short ? 1 : Math.max(1, Math.round(o.injections / 10))))
        : 0,
  });
  const records = [];
  const inflightOf = (cs) =>
    cs.flatMap((c) =>
      [...c.inflight].map(([id, f]) => ({ child: c.name, id, unit: f.unit, phase: f.phase })),
    );
  const pick = () => {
    const l = live().filter((c) => c.ready);
    const busy = l.filter((c) => c.inflight.size > 0);
    const from = busy.length ? busy : l;
    return from[Math.floor(random() * from.length)];
  };
  const waitRecovery = async (units, sinceMs, timeoutMs) => {
    // Every unit (Kafka partition, SQS group, the RabbitMQ queue) that held work settles again.
    const done = () => [...units].every((u) => (lastSettle.get(u) ?? 0) > sinceMs);
    const until = Date.now() + timeoutMs;
    while (!done() && Date.now() < until) {
      await new Promise((r) => {
        const t = setTimeout(r, 250);
        waiters.add(() => {
          clearTimeout(t);
          r();
        });
      });
      waiters.clear();
    }
    if (!done()) return undefined;
    return Math.max(...[...units].map((u) => lastSettle.get(u))) - sinceMs;
  };
  /** A tenant-restart recovered when its tenant committed a message after its cluster was up again. */
  const waitTenantRecovery = async (tenant, sinceMs, timeoutMs) => {
    const until = Date.now() + timeoutMs;
    while ((lastCommitOfTenant.get(tenant) ?? 0) <= sinceMs && Date.now() < until) await sleep(100);
    const last = lastCommitOfTenant.get(tenant) ?? 0;
    return last > sinceMs ? last - sinceMs : undefined;
  };

  /** Steers the timing: waits (up to 5 s) until `cond` holds, so the fault lands on work in flight. */
  const steer = async (cond) => {
    const until = Date.now() + 5_000;
    while (!cond() && Date.now() < until) await sleep(5);
  };
  const anyInflight = () => live().some((c) => c.inflight.size > 0);

  // An armed kill (sigkill-commit) that saw no COMMIT, because its victim had nothing in flight
  // (a rebalance can leave a Kafka consumer without partitions), landed somewhere else: it is
  // aimed again, up to REAIM_MAX times in a run, so that the campaign's share of kills between
  // COMMIT and settle does not depend on where a rebalance left the work. The missed attempt
  // stays in the records (marked `reaimed`) and out of that share.
  const REAIM_MAX = 2;
  let reaimed = 0;
  // A partition that found nothing in flight when its rules went in is aimed again: up to twice
  // the plan's own number of partitions with --partitions-only (whose goal is that many counted),
  // 3 otherwise. A run that spent its time budget before its PostgreSQL restart, or before a
  // planned partition counted, runs those (at most 4 more injections) before it drains: the
  // verdict requires them, and the CI campaign promises a partition per broker.
  const plannedPartitions = plan.filter((k) => k === 'partition').length;
  // Where one consumer rarely holds more than a message (RabbitMQ, NATS), half the attempts count.
  const partitionReaimMax = o.partitionsOnly ? 2 * plannedPartitions : 3;
  let partitionReaims = 0;
  let overtime = 0;
  const partitionCounted = () => records.some((r) => r.kind.startsWith('partition-') && r.counted);
  /** What the verdict requires and has not happened yet: it runs even past the time budget. */
  const plannedTenantRestarts = plan.filter((k) => k === 'tenant-restart').length;
  const owed = () => {
    if (!o.partitionsOnly && !records.some((r) => r.kind === 'pg-restart')) return 'pg-restart';
    if (plannedTenantRestarts > 0 && !records.some((r) => r.kind === 'tenant-restart'))
      return 'tenant-restart';
    if (plannedPartitions > 0 && !partitionCounted()) return 'partition';
    return undefined;
  };
  for (let i = 0; i < plan.length; i++) {
    let kind = plan[i];
    if (Date.now() - started > (o.maxRunMs ?? Number.POSITIVE_INFINITY)) {
      kind = owed();
      if (kind === undefined || overtime >= 4) {
        log(`time budget spent after ${i} injections`);
        break;
      }
      overtime++;
      log(`time budget spent; one more ${kind}, which the verdict requires`);
    }
    const rec = await inject(kind);
    if (kind === 'sigkill-commit' && !rec.armed && reaimed < REAIM_MAX) {
      reaimed++;
      rec.reaimed = true;
      plan.push('sigkill-commit');
    }
    if (kind === 'partition' && !rec.counted && partitionReaims < partitionReaimMax) {
      partitionReaims++;
      rec.reaimed = true;
      plan.push('partition');
    }
    // A fault that held nothing in flight still must not stop progress: wait for any unit.
    const units = new Set(rec.inFlight.map((f) => f.unit));
    if (units.size === 0) units.add(o.broker === 'kafka' ? 'p0' : o.broker === 'sqs' ? 'g:k0' : 'q');
    // Recovery counts from the end of the fault (the kill, the SIGCONT, PostgreSQL back up, the
    // partition healed). After a heal, TCP resends only when its backed-off retransmission timer
    // fires (up to 2 min apart): a partition's wait is longer.
    const ms =
      kind === 'tenant-restart'
        ? await waitTenantRecovery(rec.tenant, rec.clearedAt, 90_000)
        : await waitRecovery(
            units,
            rec.clearedAt ?? rec.landedAt,
            kind === 'partition' ? PARTITION_RECOVERY_WAIT_MS : 90_000,
          );
    rec.recovered = ms !== undefined;
    rec.recoveryMs = ms;
    rec.units = [...units];
    delete rec.landedAt;
    delete rec.clearedAt;
    records.push(compactRecord(rec));
    log(
      `#${i} ${rec.kind}${rec.tenant ? `(${rec.tenant}: other tenants committed ${rec.otherTenantCommits}${rec.otherTenantsPromised ? '' : ' (not promised: every partition carries its keys)'}, it ${rec.ownCommits}, while down)` : ''}${rec.window ? `(${rec.window})` : ''}${rec.direction ? `(${rec.direction}, ${rec.durationMs} ms, ${rec.via})` : ''}${rec.reaimed ? ' (aimed again)' : ''} counted=${rec.counted} inflight=${rec.inFlight.length} recovered=${rec.recovered} ${ms ?? '-'} ms`,
    );
    await sleep(300 + Math.floor(random() * 1200));
  }

  async function inject(kind) {
    if (!['sigkill', 'sigkill-commit', 'zombie'].includes(kind)) await steer(anyInflight);
    const t = Date.now();
    const rec = { kind, time: new Date(t).toISOString(), landedAt: t };
    const finish = (inFlight, extra = {}) =>
      Object.assign(
        rec,
        { inFlight: inFlight.map(({ id, unit, phase, child }) => ({ id, unit, phase, child })) },
        extra,
        {
          counted: inFlight.length > 0,
        },
      );
    if (kind === 'sigkill' || kind === 'sigkill-commit') {
      // A victim with work in flight: an armed kill on an idle consumer (one a rebalance left
      // without partitions) may see no COMMIT before its deadline and land outside the window.
      await steer(anyInflight);
      const victim = pick();
      if (kind === 'sigkill-commit') {
        victim.send('arm-commit-kill');
        const exit = victim.expectExit();
        const dyingBy = Date.now() + 15_000;
        let dying;
        const prev = victim.o.onLine;
        victim.o.onLine = (c, m, at) => {
          if (c === victim && m.t === 'dying') dying = m;
          prev(c, m, at);
        };
        const inflightAt = () => inflightOf([victim]);
        let snapshot = [];
        while (!dying && Date.now() < dyingBy && victim.running) {
          snapshot = inflightAt();
          await sleep(5);
        }
        victim.o.onLine = prev;
        if (!dying) await victim.kill();
        await exit;
        rec.landedAt = Date.now();
        const fl = dying
          ? snapshot.concat([{ id: dying.id, unit: '?', phase: 'committed', child: victim.name }])
          : snapshot;
        // The armed id's unit comes from the claim it reported.
        const uniq = new Map(fl.map((f) => [f.id, f]));
        for (const f of uniq.values())
          if (f.unit === '?') f.unit = snapshot.find((s) => s.id === f.id)?.unit ?? unitOfId(f.id);
        finish([...uniq.values()], {
          child: victim.name,
          window: dying ? 'commit-settle' : windowOf([...uniq.values()]),
          armed: Boolean(dying),
        });
      } else {
        await steer(() => victim.inflight.size > 0);
        const fl = inflightOf([victim]);
        await victim.kill();
        finish(fl, { child: victim.name, window: windowOf(fl) });
      }
      if (random() < 0.5) await naive.kill().then(() => naive.start());
      await sleep(200);
      victim.start();
      rec.clearedAt = rec.landedAt;
      return rec;
    }
    if (kind === 'zombie') {
      const victim = pick();
      await steer(() => victim.inflight.size > 0);
      const fl = inflightOf([victim]);
      victim.signal('SIGSTOP');
      await sleep(ZOMBIE_MS[o.broker]);
      victim.signal('SIGCONT');
      return finish(fl, { child: victim.name, faultMs: ZOMBIE_MS[o.broker], clearedAt: Date.now() });
    }
    if (kind === 'churn') {
      if (joiner.parked) {
        joiner.parked = false;
        const fl = inflightOf(live());
        joiner.start();
        return finish(fl, { kind: 'join', child: joiner.name });
      }
      await steer(() => joiner.inflight.size > 0);
      const fl = inflightOf([joiner]);
      joiner.parked = true;
      await joiner.stop();
      return finish(fl, { kind: 'leave', child: joiner.name });
    }
    if (kind === 'partition') {
      // One once consumer's namespace loses its packets to PostgreSQL, to the broker, or to both,
      // one way or both ways, for one of the configured durations; then the rules go.
      await steer(anyInflight);
      const victim = pick();
      const target = PARTITION_TARGETS[Math.floor(random() * PARTITION_TARGETS.length)];
      const direction = random() < 0.5 ? 'both' : random() < 0.5 ? 'to-target' : 'to-client';
      const durationMs = partitionMs[Math.floor(random() * partitionMs.length)];
      rec.kind = `partition-${target}`;
      // Every once consumer restarting at once (a crash loop) leaves no one to partition.
      if (!victim) return finish([], { via: partitions.via, direction, durationMs, liftedEarly: true });
      const before = inflightOf([victim]);
      await partitions.cut(victim.name, target, direction);
      const inAt = Date.now();
      rec.landedAt = inAt;
      let fl = [];
      let healedAt;
      try {
        // Lines the child wrote before the rules were in may still be on their way: let them in,
        // then keep only what had not settled by then. A partition that holds nothing in flight
        // does not count, and is lifted at once rather than waited out.
        await sleep(Math.min(200, durationMs));
        fl = before.filter((f) => !((settledAt.get(f.id) ?? Number.POSITIVE_INFINITY) < inAt));
        if (fl.length > 0) await sleep(Math.max(0, durationMs - (Date.now() - inAt)));
      } finally {
        await partitions.heal(victim.name);
        healedAt = Date.now();
      }
      return finish(fl, {
        child: victim.name,
        via: partitions.via,
        direction,
        durationMs,
        faultMs: healedAt - inAt,
        ...(fl.length === 0 ? { liftedEarly: true } : {}),
        clearedAt: healedAt,
      });
    }
    if (kind === 'pg-terminate') {
      const fl = inflightOf(live());
      const terminate = `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = 'chaos-once'`;
      const { rows } = await pool.query(terminate);
      // --tenants: the second cluster's backends too (a restart of it may be under way: then none).
      const more = tenantCluster
        ? await tenantDbs
            .get(RESTARTED_TENANT)
            .pool.query(terminate)
            .then((r) => r.rows[0].n)
            .catch(() => 0)
        : 0;
      return finish(fl, { backends: rows[0].n + more });
    }
    if (kind === 'tenant-restart') {
      // The tenant database's whole cluster crashes (`-m immediate`), stays down, and starts
      // again (WAL recovery). Meanwhile the other tenants' messages must keep committing.
      const fl = inflightOf(live());
      const t0 = Date.now();
      outageCommits = [];
      await tenantCluster.stop('immediate');
      const downAt = Date.now();
      await sleep(tenantOutageMs);
      const upFrom = Date.now();
      await tenantCluster.start();
      const commits = outageCommits;
      outageCommits = undefined;
      const window = { tenant: RESTARTED_TENANT, from: downAt, to: upFrom };
      return finish(fl, {
        tenant: RESTARTED_TENANT,
        faultMs: Date.now() - t0,
        outageMs: tenantOutageMs,
        otherTenantCommits: otherTenantCommits(commits, window),
        // Kafka holds a whole partition at a held message: promised only if a partition carried no
        // message of this tenant (reported, not enforced, otherwise, like RabbitMQ's order).
        otherTenantsPromised: otherTenantsPromised(o.broker, RESTARTED_TENANT, unitsOfTenant),
        ownCommits: commits.filter((c) => c.tenant === RESTARTED_TENANT && c.at >= downAt && c.at <= upFrom)
          .length,
        clearedAt: Date.now(),
      });
    }
    if (kind === 'broker-cut') {
      const fl = inflightOf(live());
      const n = wired.cutAll();
      return finish(fl, { connections: n });
    }
    if (kind === 'pg-restart') {
      const fl = inflightOf(live());
      const t0 = Date.now();
      await cluster.restart();
      return finish(fl, { faultMs: Date.now() - t0, clearedAt: Date.now() });
    }
    if (kind === 'broker-stop') {
      // The run's own nats-server stops for the outage (its JetStream store kept), then starts.
      const fl = inflightOf(live());
      const t0 = Date.now();
      await natsServer.stop();
      await sleep(outageMs);
      await natsServer.start();
      return finish(fl, { faultMs: Date.now() - t0, outageMs, clearedAt: Date.now() });
    }
    if (kind === 'pg-outage') {
      const fl = inflightOf(live());
      const t0 = Date.now();
      await cluster.stop('fast');
      await sleep(outageMs);
      await cluster.start();
      return finish(fl, { faultMs: Date.now() - t0, outageMs, clearedAt: Date.now() });
    }
    throw new Error(`unknown injection ${kind}`);
  }

  // ---- drain and check ----
  producing = false;
  await producer;
  log(`injections done; produced ${sent.length} ids in ${published} sends; draining`);
  const distinctIn = async (p, t) =>
    Number((await p.query(`SELECT count(DISTINCT message_id)::int AS n FROM public.${t}`)).rows[0].n);
  // --tenants: once's effects are spread over the tenant databases (an id in two counts twice here;
  // the check below finds it).
  const distinct = async (t) =>
    o.tenants && t === 'effects'
      ? (await Promise.all([...tenantDbs.values()].map((d) => distinctIn(d.pool, t)))).reduce(
          (a, b) => a + b,
          0,
        )
      : distinctIn(pool, t);
  const drainBy = Date.now() + 180_000;
  let unsettled = -1;
  let settledSince;
  for (;;) {
    const done = await distinct('effects').catch(() => -1);
    unsettled = await side.unsettled().catch(() => -1);
    const held = live().reduce((n, c) => n + c.inflight.size, 0);
    if (done === sent.length && unsettled === 0) {
      settledSince ??= Date.now();
      // Give what children still hold (RabbitMQ: unacked deliveries) a moment to settle.
      if (held === 0 || Date.now() - settledSince > 10_000) break;
    } else settledSince = undefined;
    if (Date.now() > drainBy) {
      log(`drain timed out: effects ${done}/${sent.length}, unsettled ${unsettled}, held ${held}`);
      break;
    }
    await sleep(1000);
  }
  const naiveBy = Date.now() + 60_000;
  while ((await distinct('naive_effects').catch(() => 0)) < sent.length && Date.now() < naiveBy)
    await sleep(1000);
  stopping = true;
  const exits = await Promise.all([...consumers, joiner, naive].map((c) => (c.running ? c.stop() : null)));
  await sleep(1000);
  unsettled = await side.unsettled();
  const deadLetters = await side.deadLetters();

  const readEffects = async (p) =>
    (await p.query('SELECT message_id AS "messageId", key FROM public.effects ORDER BY seq')).rows;
  // --tenants: each database's effects, in its own recording order (a key lives in one database,
  // so per-key order is judged within it); every effect must be in its key's tenant database.
  const effectsByTenant = {};
  for (const [t, d] of tenantDbs) effectsByTenant[t] = await readEffects(d.pool);
  const effects = o.tenants ? Object.values(effectsByTenant).flat() : await readEffects(pool);
  const misplaced = o.tenants ? misplacedEffects(effectsByTenant) : [];
  const verdict = checkEffects(effects, { expectedIds: sent, checkOrderPerKey: true });
  const naiveRows = (
    await pool.query('SELECT message_id AS "messageId", key FROM public.naive_effects ORDER BY seq')
  ).rows;
  const naiveVerdict = checkEffects(naiveRows, { expectedIds: sent });
  // RabbitMQ and NATS (two consumers on one durable) do not keep order for redelivered messages.
  const orderPromised = o.broker !== 'rabbitmq' && o.broker !== 'nats';

  const violations = [];
  if (verdict.duplicated.length) violations.push(`${verdict.duplicated.length} duplicated ids`);
  if (verdict.lost.length) violations.push(`${verdict.lost.length} lost ids`);
  if (verdict.unexpected.length) violations.push(`${verdict.unexpected.length} unexpected ids`);
  if (orderPromised && verdict.orderViolations.length)
    violations.push(`${verdict.orderViolations.length} keys out of order`);
  if (unsettled !== 0) violations.push(`${unsettled} unsettled at the end`);
  if (deadLetters !== 0) violations.push(`${deadLetters} dead letters`);
  if (misplaced.length) violations.push(`${misplaced.length} effects in another tenant's database`);
  const tenantRestarts = records.filter((r) => r.kind === 'tenant-restart');
  if (o.tenants && !o.partitionsOnly && tenantRestarts.length === 0)
    violations.push('no tenant database restart ran');
  for (const r of tenantRestarts) {
    if (r.otherTenantsPromised && !(r.otherTenantCommits > 0))
      violations.push(`the other tenants committed nothing while ${r.tenant} was down (${r.time})`);
    if (!r.recovered) violations.push(`${r.tenant} did not commit again after its restart (${r.time})`);
  }
  const pgRestarts = records.filter((r) => r.kind === 'pg-restart').length;
  if (pgRestarts === 0 && !o.partitionsOnly) violations.push('no PostgreSQL restart ran');
  const kills = records.filter((r) => r.kind.startsWith('sigkill') && !r.reaimed);
  const commitKills = kills.filter((r) => r.window === 'commit-settle').length;
  if (kills.length && commitKills / kills.length < 0.3)
    violations.push(`only ${commitKills}/${kills.length} SIGKILLs between COMMIT and settle`);
  if (naiveVerdict.duplicated.length === 0)
    violations.push('the naive control showed no duplicates (the campaign proves nothing)');
  const partitioned = partitionReport(records, {
    broker: o.broker,
    via: partitions.via,
    why: partitions.why,
    partitionMs,
    boundMs,
    planned: plannedPartitions,
    partitionsOnly: Boolean(o.partitionsOnly),
  });
  violations.push(...partitioned.violations);

  const commit = gitCommit();
  const summary = {
    broker: o.broker,
    ...(o.broker === 'kafka' ? { client: kafkaClient } : {}),
    seed: o.seed,
    mode: o.short ? 'short' : o.partitionsOnly ? 'partitions' : 'long',
    ...(o.tenants ? { withTenants: true } : {}),
    commit,
    startedAt: new Date(started).toISOString(),
    wallMs: Date.now() - started,
    outageMs,
    produced: { distinctIds: sent.length, sends: published, resendShare: RESEND_SHARE, keys: KEYS },
    once: {
      effects: verdict.total,
      duplicated: verdict.duplicated.length,
      lost: verdict.lost.length,
      unexpected: verdict.unexpected.length,
      keysOutOfOrder: verdict.orderViolations.length,
      orderPromised,
      unsettledAtEnd: unsettled,
      deadLetters,
    },
    naive: {
      effects: naiveVerdict.total,
      duplicatedIds: naiveVerdict.duplicated.length,
      extraEffects: naiveVerdict.total - (sent.length - naiveVerdict.lost.length),
      lost: naiveVerdict.lost.length,
    },
    injections: byKind(records),
    sigkillsBetweenCommitAndSettle: `${commitKills}/${kills.length}`,
    partitions: partitioned.report,
    ...(o.tenants
      ? {
          tenants: {
            databases: Object.fromEntries(
              Object.entries(effectsByTenant).map(([t, rows]) => [t, rows.length]),
            ),
            restarted: RESTARTED_TENANT,
            misplaced: misplaced.length,
            restarts: tenantRestarts.map((r) => ({
              time: r.time,
              outageMs: r.outageMs,
              otherTenantCommits: r.otherTenantCommits,
              otherTenantsPromised: r.otherTenantsPromised,
              ownCommits: r.ownCommits,
              recoveryMs: r.recoveryMs ?? null,
            })),
          },
        }
      : {}),
    startFailures,
    // The naive control exits on any error by design, and a once start that failed because
    // PostgreSQL was down exits 6: both are counted, not listed. What is left is news.
    naiveRestarts: incidents.filter((i) => i.mode === 'naive').length,
    incidents: incidents
      .filter((i) => i.mode === 'once' && i.code !== 6)
      .map(({ child, mode, code, signal, stderrTail }) => ({
        child,
        mode,
        code,
        signal,
        stderrTail,
      })),
    stopExits: exits.filter(Boolean),
    violations,
    ok: violations.length === 0,
  };
  if (
    verdict.duplicated.length ||
    verdict.lost.length ||
    verdict.orderViolations.length ||
    misplaced.length
  ) {
    summary.detail = {
      misplaced: misplaced.slice(0, 20),
      duplicated: verdict.duplicated.slice(0, 20),
      lost: verdict.lost.slice(0, 20),
      orderViolations: verdict.orderViolations.slice(0, 3).map((v) => ({
        key: v.key,
        firstMismatchAt: v.firstMismatchAt,
        expected: v.expected.slice(v.firstMismatchAt, v.firstMismatchAt + 5),
        actual: v.actual.slice(v.firstMismatchAt, v.firstMismatchAt + 5),
      })),
    };
  }
  if (o.write !== false) {
    mkdirSync(RESULTS, { recursive: true });
    const base = join(
      RESULTS,
      `${o.broker}${kafkaClient === 'kafkajs' ? '' : `-${kafkaClient}`}${o.tenants ? '-tenants' : ''}-${o.seed}`,
    );
    writeFileSync(`${base}.jsonl`, records.map((r) => JSON.stringify({ commit, ...r })).join('\n') + '\n');
    writeFileSync(`${base}.json`, `${jsonText(summary)}\n`);
  }

  return summary;
}

function windowOf(inFlight) {
  if (inFlight.length === 0) return 'idle';
  return inFlight.some((f) => f.phase === 'committed') ? 'commit-settle' : 'claim-commit';
}

/** Per kind: total, counted (landed with work in flight), recovered, recovery p50/p99 in ms. */
export function byKind(records) {
  const out = {};
  for (const r of records) {
    out[r.kind] ??= { total: 0, counted: 0, recovered: 0, recoveryMs: [] };
    const k = out[r.kind];
    k.total++;
    if (r.counted) k.counted++;
    if (r.recovered) {
      k.recovered++;
      k.recoveryMs.push(r.recoveryMs);
    }
  }
  for (const k of Object.values(out)) {
    const s = k.recoveryMs.sort((a, b) => a - b);
    k.recoveryP50Ms = quantile(s, 0.5);
    k.recoveryP99Ms = quantile(s, 0.99);
    delete k.recoveryMs;
  }
  return out;
}

export function quantile(sorted, q) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

export { KAFKA_PARTITIONS };
