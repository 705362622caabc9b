#!/usr/bin/env node
import { run } from './run.js';

// A thin shell: the real process streams and environment, Ctrl-C stops `purge` and
// `forget --since` between batches (a second Ctrl-C kills as usual), and the exit code is set,
// not forced, so pending output is flushed before Node exits.
const controller = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write('once: interrupted, stopping (press Ctrl-C again to force)\n');
    controller.abort(signal);
  });
}
process.exitCode = await run(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  signal: controller.signal,
  stdin: process.stdin,
});
