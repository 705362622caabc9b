import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time of the main (JavaScript) thread and of all other threads (V8's compiler and GC helpers,
 * libuv's pool), in ns, from Linux's per-thread schedstat; undefined elsewhere. `byName`: the
 * other threads' time by thread name (`V8 DefaultWorke`, `libuv-worker`, …).
 */
export function threadNs() {
  try {
    let main = 0;
    let other = 0;
    const byName = {};
    for (const tid of readdirSync('/proc/self/task')) {
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      if (Number(tid) === process.pid) main += ns;
      else {
        other += ns;
        const name = `${readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim()}#${Number(tid) - process.pid}`;
        byName[name] = (byName[name] ?? 0) + ns;
      }
    }
    return { main, other, byName };
  } catch {
    return undefined;
  }
}

/** Per-message µs of the other threads between two `threadNs()` readings, by thread name. */
export function otherThreadsUs(t0, t1, n) {
  if (!t0 || !t1) return null;
  const out = {};
  for (const [k, v] of Object.entries(t1.byName))
    out[k] = Number(((v - (t0.byName[k] ?? 0)) / 1000 / n).toFixed(1));
  return out;
}
