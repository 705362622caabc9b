/**
 * Wraps a pg Pool so that every statement sent to Postgres is counted: the benchmarks report
 * round trips per message with it (a multi-statement string is one round trip). The wrapper is
 * a PgPoolLike, so once and the baselines go through the same counting.
 */
export function countingPool(raw) {
  const counter = { trips: 0 };
  const pool = {
    query: (t, v) => {
      counter.trips++;
      return raw.query(t, v);
    },
    async connect() {
      const c = await raw.connect();
      return {
        query: (t, v) => {
          counter.trips++;
          return c.query(t, v);
        },
        release: (e) => c.release(e),
        on: (e, l) => c.on(e, l),
        off: (e, l) => c.off(e, l),
      };
    },
  };
  return { pool, counter };
}
