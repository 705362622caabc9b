import { describe, expect, it } from 'vitest';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import { compactRecord, partitionReport } from '../../chaos/partition-report.mjs';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import { planInjections, rng } from '../../chaos/plan.mjs';

// The fault campaign's partitions (chaos/): how many a plan holds, and the verdict a run's
// partition records give (chaos/partition-report.mjs). The partitions themselves are exercised
// against real namespaces in test/integration/chaos-partitions.test.ts.

type Rec = {
  kind: string;
  via: string;
  direction: string;
  durationMs: number;
  counted: boolean;
  recovered: boolean;
  recoveryMs?: number | undefined;
};
const count = (plan: string[], kind: string) => plan.filter((k) => k === kind).length;

describe('planInjections with partitions', () => {
  it('holds the asked number of partitions in a mixed plan, and keeps its length', () => {
    for (const [n, partitions] of [
      [14, 0],
      [14, 1],
      [14, 3],
      [40, 3],
      [100, 10],
      [100, 0],
    ] as const) {
      {
        const plan = planInjections(n, rng(7), { partitions });
        expect(plan).toHaveLength(n);
        expect(count(plan, 'partition')).toBe(partitions);
        // The mix keeps its obligatory kinds.
        expect(count(plan, 'pg-outage')).toBe(1);
        expect(count(plan, 'pg-restart')).toBeGreaterThanOrEqual(1);
      }
    }
  });

  it('is all partitions with partitions: only', () => {
    expect(planInjections(5, rng(1), { partitions: 'only' })).toEqual(new Array(5).fill('partition'));
  });

  it('never trims a kind other than sigkill to fit a short plan', () => {
    // 14 injections, NATS's broker stop and 6 partitions: more than fit once every kind has one.
    const plan: string[] = planInjections(14, rng(3), { brokerStop: true, partitions: 6 });
    expect(count(plan, 'partition')).toBe(6);
    expect(count(plan, 'broker-stop')).toBe(1);
    expect(count(plan, 'pg-outage')).toBe(1);
    expect(count(plan, 'pg-restart')).toBe(1);
  });

  it('is the same plan for the same seed', () => {
    expect(planInjections(30, rng(42), { partitions: 3 })).toEqual(
      planInjections(30, rng(42), { partitions: 3 }),
    );
  });
});

describe('partitionReport', () => {
  const part = (over: Partial<Rec>): Rec => ({
    kind: 'partition-pg',
    via: 'namespace',
    direction: 'both',
    durationMs: 2_000,
    counted: true,
    recovered: true,
    recoveryMs: 100,
    ...over,
  });
  const opts = {
    broker: 'kafka',
    via: 'namespace',
    partitionMs: [2_000, 15_000],
    boundMs: 30_000,
    planned: 1,
    partitionsOnly: false,
  };

  it('passes a run whose counted partitions all recovered, and reports p99 against the bound', () => {
    const records = [
      part({ recoveryMs: 100 }),
      part({ kind: 'partition-broker', durationMs: 15_000, recoveryMs: 40_000, direction: 'to-client' }),
      { kind: 'sigkill', counted: true, recovered: true, recoveryMs: 5 },
    ];
    const { report, violations } = partitionReport(records, opts);
    expect(violations).toEqual([]);
    expect(report).toMatchObject({
      via: 'namespace',
      total: 2,
      counted: 2,
      countedTowardGoal: 2,
      recovered: 2,
      recoveryP99Ms: 40_000,
      statementBoundMs: 30_000,
      brokerTimeoutMs: 6_000,
      recoveryP99WithinStatementBound: false,
    });
    expect(report.byLength['15000']).toMatchObject({ counted: 1, recoveryP99Ms: 40_000 });
    expect(report.byDirection['to-client']).toMatchObject({ counted: 1 });
  });

  it('fails a run with a partition that did not recover', () => {
    const { violations } = partitionReport(
      [part({}), part({ recovered: false, recoveryMs: undefined })],
      opts,
    );
    expect(violations).toEqual(['1 partitions not recovered']);
  });

  it('fails a run that planned partitions and counted none in namespaces', () => {
    const { violations } = partitionReport([part({ counted: false })], opts);
    expect(violations).toEqual(['only 0/1 namespace partitions counted']);
  });

  it('holds --partitions-only to its planned number', () => {
    const { violations } = partitionReport([part({}), part({}), part({ counted: false })], {
      ...opts,
      planned: 3,
      partitionsOnly: true,
    });
    expect(violations).toEqual(['only 2/3 namespace partitions counted']);
  });

  it('counts nothing toward the goal through the proxy stand-in, and does not fail for it', () => {
    const { report, violations } = partitionReport([part({ via: 'proxy' })], {
      ...opts,
      via: 'proxy',
      why: 'not root',
    });
    expect(violations).toEqual([]);
    expect(report).toMatchObject({ via: 'proxy', why: 'not root', counted: 1, countedTowardGoal: 0 });
  });
});

describe('compactRecord', () => {
  it('keeps the count and three ids of what was in flight', () => {
    const inFlight = ['a', 'b', 'c', 'd'].map((id) => ({
      id,
      unit: 'p0',
      phase: 'claimed',
      child: 'once-1',
    }));
    expect(compactRecord({ kind: 'partition-pg', counted: true, inFlight })).toEqual({
      kind: 'partition-pg',
      counted: true,
      inFlight: 4,
      inFlightIds: ['a', 'b', 'c'],
    });
  });
});
