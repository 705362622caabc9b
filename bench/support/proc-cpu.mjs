// CPU time by process group, read from Linux's /proc (issue #14, the relays): how much CPU this
// Node process, PostgreSQL (postmaster, backends, WAL writer, checkpointer) and each broker's
// server spent over a window, beside the whole machine's busy share. On a machine where the bench,
// PostgreSQL and the broker share the cores, this is what tells a CPU ceiling (the machine near
// 100 % busy, the rate times the CPU per row near the cores available) from waiting.
// Process times come in clock ticks (100 a second on Linux); a process that started inside the
// window counts from zero, one that ended inside it is lost (autovacuum workers, a pool's backend
// closed before the second snapshot), so take the second snapshot before closing connections.
// Off Linux every figure is null.
import { readdirSync, readFileSync } from 'node:fs';

const TICK_S = 0.01;

/** The group a process belongs to, from its name and command line; undefined: not counted. */
function groupOf(pid, comm) {
  if (pid === process.pid) return 'node';
  if (comm === 'postgres') return 'postgres';
  if (comm === 'beam.smp') return 'rabbitmq';
  if (comm === 'nats-server') return 'nats';
  if (comm === 'java') {
    let args = '';
    try {
      args = readFileSync(`/proc/${pid}/cmdline`, 'latin1');
    } catch {
      return undefined;
    }
    if (args.includes('kafka.Kafka')) return 'kafka';
    if (args.includes('elasticmq')) return 'elasticmq';
  }
  return undefined;
}

/** Ticks spent by every counted process, by pid, and the machine's busy and total ticks. */
export function cpuSnapshot() {
  let dirs;
  try {
    dirs = readdirSync('/proc');
  } catch {
    return null;
  }
  const procs = new Map();
  for (const d of dirs) {
    if (d.charCodeAt(0) < 48 || d.charCodeAt(0) > 57) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${d}/stat`, 'latin1');
    } catch {
      continue; // ended between the listing and the read
    }
    // "pid (comm) state ppid ...": comm may hold spaces, so fields are counted after the last ')'.
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const group = groupOf(Number(d), comm);
    if (!group) continue;
    const f = stat.slice(close + 2).split(' ');
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the state.
    procs.set(d, { group, ticks: Number(f[11]) + Number(f[12]) });
  }
  const cpu = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
  const total = cpu.slice(0, 8).reduce((s, x) => s + x, 0);
  const busy = total - cpu[3] - cpu[4];
  return { procs, busy, total };
}

/**
 * CPU seconds by group between two snapshots, `other` (the machine's busy time no counted group
 * explains: the kernel's own work, other programs) and `busyShare`, the machine's busy fraction of
 * all its cores over the window.
 */
export function cpuBetween(a, b) {
  if (!a || !b) return null;
  const out = { node: 0, postgres: 0, kafka: 0, elasticmq: 0, rabbitmq: 0, nats: 0 };
  for (const [pid, p] of b.procs) out[p.group] += (p.ticks - (a.procs.get(pid)?.ticks ?? 0)) * TICK_S;
  const busy = (b.busy - a.busy) * TICK_S;
  const counted = Object.values(out).reduce((s, x) => s + x, 0);
  for (const k of Object.keys(out)) out[k] = Number(out[k].toFixed(3));
  return {
    ...out,
    other: Number(Math.max(0, busy - counted).toFixed(3)),
    busySeconds: Number(busy.toFixed(3)),
    busyShare: b.total > a.total ? Number(((b.busy - a.busy) / (b.total - a.total)).toFixed(3)) : null,
  };
}

/**
 * CPU ticks of the given PostgreSQL backends, by pid, read from /proc; a pid that is gone counts 0.
 * Null if one of them is not a local `postgres` process (a server in a container or on another
 * machine, whose pids are not ours to read) or /proc cannot be read.
 */
export function backendTicks(pids) {
  const out = new Map();
  for (const pid of pids) {
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    } catch (err) {
      if (err?.code !== 'ENOENT') return null;
      out.set(pid, 0);
      continue;
    }
    const close = stat.lastIndexOf(')');
    if (stat.slice(stat.indexOf('(') + 1, close) !== 'postgres') return null;
    const f = stat.slice(close + 2).split(' ');
    out.set(pid, Number(f[11]) + Number(f[12]));
  }
  return out;
}

/**
 * CPU seconds spent by the PostgreSQL backends whose `application_name` is `name`, between
 * `const s = await backendCpu(client, name)` and `await backendCpu(client, name, s)`; `client`
 * is a connection not so named. On a server other programs also use, the `postgres` group of
 * cpuBetween counts their statements too; this counts only the bench's own. A backend that starts
 * inside the window counts from zero, one that ends inside it is lost: the bench's pool keeps its
 * connections (idleTimeoutMillis: 0). Null where the backends cannot be read (see backendTicks).
 */
export async function backendCpu(client, name, start) {
  const { rows } = await client.query('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [name]);
  const now = backendTicks(rows.map((r) => r.pid));
  if (start === undefined) return now;
  if (!now || !start) return null;
  let ticks = 0;
  for (const [pid, t] of now) ticks += t - (start.get(pid) ?? 0);
  return Number((ticks * TICK_S).toFixed(3));
}
