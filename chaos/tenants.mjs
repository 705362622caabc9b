// The campaign's tenants (`--tenants`): the once consumers route every message, by its key, to one
// of three databases. tenant_0 and tenant_1 live on the run's PostgreSQL cluster; tenant_2 on a
// second private cluster, which the `tenant-restart` fault crashes and starts again. The pure parts
// (the mapping, the ledger's per-database check, the count of other tenants' commits during an
// outage) are here, unit-tested in test/unit/chaos-tenants.test.ts.

/** The tenant databases, in the order given to `databases` (the first is once's home database). */
export const TENANTS = Object.freeze(['tenant_0', 'tenant_1', 'tenant_2']);

/** The tenant whose database lives on the second cluster, the one `tenant-restart` restarts. */
export const RESTARTED_TENANT = 'tenant_2';

/**
 * The tenant of a producer key (`k0` … `k11`): key number modulo the number of tenants, so the 12
 * keys fall 4 to each tenant and every Kafka partition, SQS group set and queue mixes tenants.
 * A key of another shape is an error: the router must never guess.
 */
export function tenantOfKey(key, tenants = TENANTS) {
  const m = /^k(\d+)$/.exec(String(key));
  if (!m) throw new Error(`tenantOfKey: '${key}' is not a campaign key (k<number>)`);
  return tenants[Number(m[1]) % tenants.length];
}

/**
 * Effects found in a database other than their key's tenant. `effectsByTenant`: tenant name →
 * effects (`{ messageId, key }`) read from that database. Returns one entry per misplaced effect.
 */
export function misplacedEffects(effectsByTenant, tenantOf = tenantOfKey) {
  const out = [];
  for (const [tenant, effects] of Object.entries(effectsByTenant)) {
    for (const e of effects) {
      const belongs = tenantOf(e.key);
      if (belongs !== tenant) out.push({ id: e.messageId, key: e.key, foundIn: tenant, belongs });
    }
  }
  return out;
}

/**
 * How many commits of tenants other than `tenant` happened within [`from`, `to`] (ms): proof that
 * the other databases kept working while `tenant`'s was down. `commits`: `{ tenant, at }`.
 */
export function otherTenantCommits(commits, { tenant, from, to }) {
  let n = 0;
  for (const c of commits) if (c.tenant !== tenant && c.at >= from && c.at <= to) n++;
  return n;
}

/**
 * Whether once promises that other tenants commit while `tenant`'s database is down. Kafka holds a
 * whole partition at its first held message (docs/operations.md): there the promise covers only
 * partitions that carry none of `tenant`'s keys, and holds only if one exists. The other brokers
 * hold per message (SQS and NATS give it back with a delay, RabbitMQ re-publishes it to its retry
 * queue). `unitsByTenant`: tenant → the units (Kafka `p<partition>`) its messages were claimed on.
 */
export function otherTenantsPromised(broker, tenant, unitsByTenant) {
  if (broker !== 'kafka') return true;
  const held = unitsByTenant.get(tenant) ?? new Set();
  for (const [t, units] of unitsByTenant) {
    if (t === tenant) continue;
    for (const u of units) if (!held.has(u)) return true;
  }
  return false;
}
