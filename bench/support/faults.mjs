/**
 * The faults stream the adapter benches run beside their clean one (issue #14, step 6), as the
 * core bench does: 5 % of the messages fail transiently on their first attempt (the bench's effect
 * callback throws after the effect, so the transaction rolls back, in every variant alike) and 5 %
 * are published twice with the same id. Which messages is chosen by index, not at random, so every
 * variant and every repetition meets the same faults and the paired ratios compare like with like.
 */

const MODES = Object.freeze({
  clean: Object.freeze({ mode: 'clean', duplicates: 0, failures: 0 }),
  faults: Object.freeze({ mode: 'faults', duplicates: 0.05, failures: 0.05 }),
});

/** The streams BENCH_STREAMS names (comma-separated, default `clean,faults`), in that order. */
export function streamsFromEnv(env = process.env) {
  const names = (env.BENCH_STREAMS ?? 'clean,faults').split(',').filter(Boolean);
  const unknown = names.filter((n) => !(n in MODES));
  if (names.length === 0 || unknown.length > 0)
    throw new Error(`BENCH_STREAMS: expected clean and/or faults, got "${env.BENCH_STREAMS}"`);
  return [...new Set(names)].map((n) => MODES[n]);
}

/** Index k fails on its first attempt (one in twenty). */
const failsFirst = (k) => k % 20 === 3;
/** Index k is published a second time, ten messages later (one in twenty, not the failing ones). */
const repeated = (k) => k % 20 === 11;
const REPEAT_AFTER = 10;

/**
 * One run's stream of `n` distinct messages: `order` lists the index of each message to publish
 * (a repeated index appears twice), `published` its length, and `fail(id)` - called by the bench's
 * effect callback right after the effect - throws on the first attempt of a failing message.
 * A clean stream is `0..n-1` with no failures.
 */
export function faultRun(stream, n, idOf) {
  const faulty = stream.mode === 'faults';
  const order = [];
  for (let k = 0; k < n; k++) {
    order.push(k);
    const back = k - REPEAT_AFTER;
    if (faulty && back >= 0 && repeated(back)) order.push(back);
  }
  if (faulty) for (let k = Math.max(0, n - REPEAT_AFTER); k < n; k++) if (repeated(k)) order.push(k);
  const pending = new Set();
  if (faulty) for (let k = 0; k < n; k++) if (failsFirst(k)) pending.add(idOf(k));
  return {
    order,
    published: order.length,
    distinct: n,
    failing: pending.size,
    fail(id) {
      if (pending.delete(id)) throw new Error('bench: transient failure');
    },
  };
}

/**
 * The check every run ends with: each of the `distinct` ids has its effect, and none twice - except
 * in B1 (no inbox), which applies every published copy once: `rows` must then equal `published`.
 * Throws, naming the variant and the stream, if not.
 */
export function checkEffects({ variant, stream, rows, ids, run, dedup }) {
  const want = dedup ? run.distinct : run.published;
  if (ids !== run.distinct || rows !== want)
    throw new Error(
      `${variant} (${stream.mode}): ${rows} effects over ${ids} ids; expected ${want} over ${run.distinct}`,
    );
}

/**
 * The B1 (bare) variants' transaction: BEGIN, `work(client)`, COMMIT; rolled back and rethrown
 * when `work` throws (a faults-stream failure), so the broker redelivers.
 */
export async function bareTransaction(pool, work) {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await work(c);
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK');
    throw err;
  } finally {
    c.release();
  }
}
