/** How long a run may go without a message done before it fails (BENCH_STALL_MS, default 60 s). */
export const STALL_MS = Number(process.env.BENCH_STALL_MS ?? 60_000);

/**
 * A run's count of finished messages: `add(k)` counts k more; `finished` resolves once `total`
 * are done, and rejects if none was done for `stallMs` - naming `label` (the variant and the
 * repetition) and how many of `total` were done - so a run that stops making progress fails the
 * bench instead of waiting forever.
 */
export function doneCount({ total, label, stallMs = STALL_MS }) {
  let done = 0;
  let last = performance.now();
  let resolve;
  let reject;
  const finished = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const watch = setInterval(
    () => {
      const idle = performance.now() - last;
      if (idle < stallMs) return;
      clearInterval(watch);
      reject(
        new Error(
          `${label}: no progress for ${Math.floor(idle / 1000)} s, ${done} of ${total} messages done`,
        ),
      );
    },
    Math.min(1_000, stallMs),
  );
  if (total <= 0) {
    clearInterval(watch);
    resolve();
  }
  return {
    finished,
    get done() {
      return done;
    },
    add(k = 1) {
      if (k <= 0) return;
      done += k;
      last = performance.now();
      if (done >= total) {
        clearInterval(watch);
        resolve();
      }
    },
  };
}

/**
 * One timed run of a broker bench variant: `consume(onDone)` starts a consumer that calls
 * `onDone()` once per finished message and resolves to its stop function; the run ends when N
 * messages are done, and fails (naming `label`, default `name`) if none is done for
 * BENCH_STALL_MS. Returns throughput, PostgreSQL round trips, CPU and RSS per message, and
 * prints one line. Filling the destination before and cleaning up after stay with the caller.
 */
export async function timeConsumer({ name, n, counter, consume, label = name }) {
  if (global.gc) global.gc();
  const rt0 = counter.trips;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const count = doneCount({ total: n, label });
  const stop = await consume(() => count.add(1));
  await count.finished;
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await stop();
  const r = {
    variant: name,
    msgsPerSec: n / (ms / 1000),
    roundTripsPerMsg: (counter.trips - rt0) / n,
    cpuUsPerMsg: (cpu.user + cpu.system) / n,
    rssMiB: process.memoryUsage().rss / 2 ** 20,
  };
  console.log(
    `  ${name.padEnd(11)} ${r.msgsPerSec.toFixed(0).padStart(7)} msg/s  ${r.roundTripsPerMsg.toFixed(2)} rt/msg  ${r.cpuUsPerMsg.toFixed(0)} µs cpu/msg`,
  );
  return r;
}
