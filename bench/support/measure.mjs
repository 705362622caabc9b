/**
 * One timed run of a broker bench variant: `consume(onDone)` starts a consumer that calls
 * `onDone()` once per finished message and resolves to its stop function; the run ends when N
 * messages are done. Returns throughput, PostgreSQL round trips, CPU and RSS per message, and
 * prints one line. Filling the destination before and cleaning up after stay with the caller.
 */
export async function timeConsumer({ name, n, counter, consume }) {
  if (global.gc) global.gc();
  const rt0 = counter.trips;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let done = 0;
  let finish;
  const finished = new Promise((r) => {
    finish = r;
  });
  const stop = await consume(() => {
    if (++done === n) finish();
  });
  await finished;
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
