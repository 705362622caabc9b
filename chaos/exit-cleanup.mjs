// Synchronous cleanups that must run however the campaign ends: at a normal exit, and on SIGINT,
// SIGTERM or SIGHUP (Node's default for those exits without running `finally` blocks, which would
// leave namespaces, orphaned consumer children and a private PostgreSQL behind).
const cleanups = new Set();
let installed = false;

function runAll() {
  for (const fn of [...cleanups].reverse()) {
    try {
      fn();
    } catch {
      /* the next one must still run */
    }
  }
  cleanups.clear();
}

/** Registers a synchronous cleanup; returns a function that unregisters it. */
export function onExit(fn) {
  if (!installed) {
    installed = true;
    process.on('exit', runAll);
    for (const [sig, n] of [
      ['SIGINT', 2],
      ['SIGTERM', 15],
      ['SIGHUP', 1],
    ]) {
      process.on(sig, () => {
        process.stderr.write(`chaos: ${sig}, cleaning up\n`);
        process.exit(128 + n);
      });
    }
  }
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}
