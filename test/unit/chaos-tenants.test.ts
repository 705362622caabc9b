import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import { KINDS, planInjections, rng } from '../../chaos/plan.mjs';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import * as tenants from '../../chaos/tenants.mjs';

const { misplacedEffects, otherTenantCommits, otherTenantsPromised, RESTARTED_TENANT, TENANTS, tenantOfKey } =
  tenants;

// The fault campaign's tenants (`--tenants`, chaos/tenants.mjs): which database a key routes to,
// the ledger's check that every effect is in its own tenant's database, the count of the other
// tenants' commits while one is down, and the plan's `tenant-restart`s. The restarts themselves
// run in the campaign (`npm run chaos -- --tenants`).

const count = (plan: string[], kind: string) => plan.filter((k) => k === kind).length;
type Effect = { messageId: string; key: string };

describe('tenantOfKey', () => {
  it('maps the 12 campaign keys 4 to each of the 3 tenants', () => {
    const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
    const per = new Map<string, number>();
    for (const k of keys) per.set(tenantOfKey(k), (per.get(tenantOfKey(k)) ?? 0) + 1);
    expect([...per.keys()].sort()).toEqual([...TENANTS].sort());
    expect([...per.values()]).toEqual([4, 4, 4]);
    expect(tenantOfKey('k2')).toBe(RESTARTED_TENANT);
  });

  it('is a function of the key: one key, one tenant, always one of TENANTS', () => {
    fc.assert(
      fc.property(fc.nat({ max: 1_000_000 }), (n) => {
        const t = tenantOfKey(`k${n}`);
        expect(TENANTS).toContain(t);
        expect(tenantOfKey(`k${n}`)).toBe(t);
        expect(t).toBe(TENANTS[n % TENANTS.length]);
      }),
    );
  });

  it('refuses a key that is not a campaign key rather than guess', () => {
    for (const k of ['', 'x1', 'k', 'k-1', 'k1a', ' k1'])
      expect(() => tenantOfKey(k)).toThrow(/campaign key/);
  });
});

describe('misplacedEffects', () => {
  it('is empty when every effect is in its key tenant database', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.uuid(), fc.nat({ max: 11 }))), (rows) => {
        const byTenant: Record<string, Effect[]> = Object.fromEntries(TENANTS.map((t: string) => [t, []]));
        for (const [id, k] of rows) byTenant[tenantOfKey(`k${k}`)]?.push({ messageId: id, key: `k${k}` });
        expect(misplacedEffects(byTenant)).toEqual([]);
      }),
    );
  });

  it('names each effect found in another tenant database', () => {
    const byTenant = {
      tenant_0: [
        { messageId: 'a', key: 'k0' },
        { messageId: 'b', key: 'k2' },
      ],
      tenant_1: [{ messageId: 'c', key: 'k1' }],
      tenant_2: [
        { messageId: 'b', key: 'k2' },
        { messageId: 'd', key: 'k4' },
      ],
    };
    expect(misplacedEffects(byTenant)).toEqual([
      { id: 'b', key: 'k2', foundIn: 'tenant_0', belongs: 'tenant_2' },
      { id: 'd', key: 'k4', foundIn: 'tenant_2', belongs: 'tenant_1' },
    ]);
  });
});

describe('otherTenantCommits', () => {
  it("counts only other tenants' commits inside the window, both ends included", () => {
    const commits = [
      { tenant: 'tenant_0', at: 99 },
      { tenant: 'tenant_0', at: 100 },
      { tenant: 'tenant_1', at: 150 },
      { tenant: 'tenant_2', at: 150 },
      { tenant: 'tenant_1', at: 200 },
      { tenant: 'tenant_1', at: 201 },
    ];
    expect(otherTenantCommits(commits, { tenant: 'tenant_2', from: 100, to: 200 })).toBe(3);
    expect(otherTenantCommits(commits, { tenant: 'tenant_1', from: 100, to: 200 })).toBe(2);
    expect(otherTenantCommits([], { tenant: 'tenant_2', from: 0, to: 1e9 })).toBe(0);
  });
});

describe('otherTenantsPromised', () => {
  const units = (o: Record<string, string[]>) => new Map(Object.entries(o).map(([t, u]) => [t, new Set(u)]));

  it('is promised on SQS, RabbitMQ and NATS, which hold per message', () => {
    const all = units({ tenant_0: ['q'], tenant_2: ['q'] });
    for (const b of ['sqs', 'rabbitmq', 'nats']) expect(otherTenantsPromised(b, 'tenant_2', all)).toBe(true);
  });

  it('on Kafka, only when a partition carried none of the tenant keys', () => {
    const mixed = units({
      tenant_0: ['p0', 'p1'],
      tenant_1: ['p2', 'p3'],
      tenant_2: ['p0', 'p1', 'p2', 'p3'],
    });
    expect(otherTenantsPromised('kafka', 'tenant_2', mixed)).toBe(false);
    const free = units({ tenant_0: ['p0', 'p3'], tenant_1: ['p2'], tenant_2: ['p0', 'p1', 'p2'] });
    expect(otherTenantsPromised('kafka', 'tenant_2', free)).toBe(true);
    expect(otherTenantsPromised('kafka', 'tenant_2', units({ tenant_0: ['p0'] }))).toBe(true);
    expect(otherTenantsPromised('kafka', 'tenant_2', units({}))).toBe(false);
  });
});

describe('planInjections with tenant restarts', () => {
  it('holds none unless asked: the default plan is unchanged', () => {
    expect(KINDS).toContain('tenant-restart');
    for (const n of [1, 5, 9, 10, 11, 14, 40, 100])
      for (const seed of [1, 7, 2701])
        for (const brokerStop of [false, true]) {
          const plain: string[] = planInjections(n, rng(seed), { brokerStop, partitions: 1 });
          expect(count(plain, 'tenant-restart')).toBe(0);
          expect(planInjections(n, rng(seed), { brokerStop, partitions: 1, tenantRestarts: 0 })).toEqual(
            plain,
          );
        }
  });

  it('holds the asked number, keeps the length and the obligatory kinds', () => {
    for (const [n, tenantRestarts] of [
      [14, 1],
      [40, 4],
      [100, 10],
    ] as const) {
      const plan: string[] = planInjections(n, rng(5), { partitions: 1, tenantRestarts });
      expect(plan).toHaveLength(n);
      expect(count(plan, 'tenant-restart')).toBe(tenantRestarts);
      expect(count(plan, 'partition')).toBe(1);
      expect(count(plan, 'pg-outage')).toBe(1);
      expect(count(plan, 'pg-restart')).toBeGreaterThanOrEqual(1);
    }
  });

  it('never trims a tenant restart to fit a short plan (only random SIGKILLs go)', () => {
    const plan: string[] = planInjections(14, rng(3), { partitions: 1, tenantRestarts: 3 });
    expect(count(plan, 'tenant-restart')).toBe(3);
    expect(count(plan, 'pg-outage')).toBe(1);
    expect(count(plan, 'pg-restart')).toBe(1);
  });

  it('is the same plan for the same seed', () => {
    expect(planInjections(30, rng(9), { tenantRestarts: 3 })).toEqual(
      planInjections(30, rng(9), { tenantRestarts: 3 }),
    );
  });
});
