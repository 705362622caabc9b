// The seeded part of a campaign: a PRNG and the shuffled list of injections.

/** mulberry32: a small, fast PRNG; the same seed gives the same run plan. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Every fault kind the campaign injects. `churn` is a consumer joining, or leaving if one joined;
 * `partition` is recorded as `partition-pg`, `partition-broker` or `partition-both`;
 * `tenant-restart` (only with `--tenants`) is a crash restart of the tenant database's own cluster.
 */
export const KINDS = Object.freeze([
  'sigkill',
  'sigkill-commit',
  'zombie',
  'churn',
  'pg-terminate',
  'broker-cut',
  'pg-restart',
  'pg-outage',
  'broker-stop',
  'partition',
  'tenant-restart',
]);

/**
 * How short a plan may be trimmed (dropping random SIGKILLs): the kinds of a plan without tenants.
 * It is not `KINDS.length`, so that adding `tenant-restart` left every plan without it as it was.
 */
const TRIM_FLOOR = KINDS.length - 1;

/** Share of the injections per kind; one pg-outage per run, at least one pg-restart. */
const SHARE = {
  sigkill: 0.22,
  'sigkill-commit': 0.16,
  zombie: 0.08,
  churn: 0.14,
  'pg-terminate': 0.16,
  'broker-cut': 0.16,
  'pg-restart': 0.08,
};

/**
 * `n` injections in a seeded random order. `brokerStop`: one stop of the broker itself, for a
 * broker the run has a server of its own for (NATS). `partitions`: how many network partitions
 * the mix holds (they take the place of random SIGKILLs), or `'only'`: `n` partitions and nothing else.
 * `tenantRestarts`: how many restarts of the tenant database's cluster the mix holds (`--tenants`
 * runs; they too take the place of random SIGKILLs). Without them the plan is what it always was.
 */
export function planInjections(n, random, { brokerStop = false, partitions = 0, tenantRestarts = 0 } = {}) {
  if (partitions === 'only') return new Array(n).fill('partition');
  const bag = brokerStop ? ['pg-outage', 'broker-stop'] : ['pg-outage'];
  for (let i = 0; i < partitions; i++) bag.push('partition');
  for (let i = 0; i < tenantRestarts; i++) bag.push('tenant-restart');
  for (const [kind, share] of Object.entries(SHARE)) {
    const count = Math.max(1, Math.round(share * (n - 1)));
    for (let i = 0; i < count; i++) bag.push(kind);
  }
  while (bag.length > n && bag.length > TRIM_FLOOR && bag.includes('sigkill'))
    bag.splice(bag.lastIndexOf('sigkill'), 1);
  while (bag.length < n) bag.push('sigkill');
  for (let i = bag.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [bag[i], bag[j]] = [bag[j], bag[i]];
  }
  return bag;
}
