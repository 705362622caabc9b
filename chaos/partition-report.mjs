// What a run's partitions showed: how many counted (a namespace partition that began with a
// message between claim and settle on the partitioned consumer), how many recovered, and the
// recovery times (heal to the next settle on each affected partition, group or queue) by length,
// beside the bounds they are measured against. Also the compact form of every record the run
// writes to chaos/results (a count and a few ids instead of every message in flight).

/**
 * The broker-side timeout each campaign consumer runs with (chaos/consumer.mjs): Kafka's session,
 * SQS's visibility, RabbitMQ's two missed 5 s heartbeats, NATS's ack_wait. A partition longer than
 * this hands the victim's work to another consumer while the victim may still hold its claim.
 */
export const BROKER_TIMEOUT_MS = Object.freeze({ kafka: 6_000, sqs: 3_000, rabbitmq: 10_000, nats: 6_000 });

const quantile = (sorted, q) =>
  sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];

/** A record as written: the in-flight list becomes its size and the first three ids. */
export function compactRecord(rec) {
  const { inFlight, ...rest } = rec;
  return { ...rest, inFlight: inFlight.length, inFlightIds: inFlight.slice(0, 3).map((f) => f.id) };
}

const isPartition = (r) => r.kind.startsWith('partition-');

function stats(rs) {
  const counted = rs.filter((r) => r.counted);
  const ms = counted
    .filter((r) => r.recovered)
    .map((r) => r.recoveryMs)
    .sort((a, b) => a - b);
  return {
    total: rs.length,
    counted: counted.length,
    recovered: ms.length,
    recoveryP50Ms: quantile(ms, 0.5),
    recoveryP99Ms: quantile(ms, 0.99),
    recoveryMaxMs: ms.at(-1) ?? null,
  };
}

/**
 * The partitions' part of a run summary and the violations it finds.
 * @param {object[]} records compact records of the run
 * @param {{ broker: string, via: string, why?: string, partitionMs: number[], boundMs: number,
 *   planned: number, partitionsOnly: boolean }} o
 */
export function partitionReport(records, o) {
  const rs = records.filter(isPartition);
  const all = stats(rs);
  const byLength = {};
  for (const ms of o.partitionMs) byLength[ms] = stats(rs.filter((r) => r.durationMs === ms));
  const byKind = {};
  for (const k of ['partition-pg', 'partition-broker', 'partition-both'])
    byKind[k] = stats(rs.filter((r) => r.kind === k));
  const byDirection = {};
  for (const d of ['both', 'to-target', 'to-client'])
    byDirection[d] = stats(rs.filter((r) => r.direction === d));
  const report = {
    via: o.via,
    ...(o.why ? { why: o.why } : {}),
    lengthsMs: o.partitionMs,
    statementBoundMs: o.boundMs,
    brokerTimeoutMs: BROKER_TIMEOUT_MS[o.broker],
    planned: o.planned,
    ...all,
    // Only namespace partitions count toward the campaign's goal (a proxy keeps ACKing).
    countedTowardGoal: o.via === 'namespace' ? all.counted : 0,
    recoveryP99WithinStatementBound: all.recoveryP99Ms === null ? null : all.recoveryP99Ms <= o.boundMs,
    byLength,
    byKind,
    byDirection,
  };
  const violations = [];
  const lost = rs.filter((r) => !r.recovered).length;
  if (lost) violations.push(`${lost} partitions not recovered`);
  if (o.planned > 0 && o.via === 'namespace') {
    const want = o.partitionsOnly ? o.planned : 1;
    if (all.counted < want) violations.push(`only ${all.counted}/${want} namespace partitions counted`);
  }
  return { report, violations };
}
