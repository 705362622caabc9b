// @ts-check
// The demo's side of an example's consumer process (examples/*/src/consumer.mjs): one JSON line of
// inbox outcome counts every 50 ms and on exit, which consumer-process.mjs reads for the runner to
// sum, and a graceful stop on SIGTERM, also when the signal comes while the consumer is still
// starting (a Kafka group join takes seconds): then it waits for the start, and stops.

const OUTCOMES = /** @type {const} */ (['processed', 'duplicate', 'conflict', 'failed', 'retry', 'busy']);

/**
 * Starts `service` and reports for it until SIGTERM, then stops it, calls `close` and exits 0.
 * @param {{ inbox: Pick<import('@once/core').Inbox, 'on'>, start(): Promise<void>, stop(): Promise<void> }} service
 * @param {() => Promise<void>} close releases what the process opened (pool, clients)
 */
export async function runReporting(service, close) {
  /** @type {Record<(typeof OUTCOMES)[number], number>} */
  const counts = { processed: 0, duplicate: 0, conflict: 0, failed: 0, retry: 0, busy: 0 };
  for (const outcome of OUTCOMES) service.inbox.on(`message:${outcome}`, () => counts[outcome]++);
  const report = () => process.stdout.write(`${JSON.stringify(counts)}\n`);
  const started = service.start();
  process.once('SIGTERM', async () => {
    await started.catch(() => {});
    await service.stop();
    report();
    await close();
    process.exit(0);
  });
  await started;
  report();
  setInterval(report, 50).unref();
}
