// The test application every binding serves, framework-neutral: each route is a function of the
// engine's ctx (or none, for the naive control) and the parsed request. Plain JavaScript, so the
// child server processes (which run on the built dist/) and the in-process tests share it.
// Test-only SQL against the test's own schema; the package's own SQL lives in @once/core.

/** Creates the test tables in `schema` (once's tables come from migrate()). */
export async function createTestTables(pool, schema) {
  const s = `"${schema}"`;
  await pool.query(`CREATE TABLE IF NOT EXISTS ${s}.http_effects (
    seq bigserial PRIMARY KEY, route text NOT NULL, principal text NOT NULL, key text NOT NULL,
    attempt int NOT NULL DEFAULT 1, at timestamptz NOT NULL DEFAULT now())`);
  await pool.query(`CREATE TABLE IF NOT EXISTS ${s}.http_external (
    seq bigserial PRIMARY KEY, idem_key text NOT NULL, key text NOT NULL, step text NOT NULL)`);
  // A constraint checked only at COMMIT: inserting 1 again passes the statement and fails COMMIT.
  await pool.query(
    `CREATE TABLE IF NOT EXISTS ${s}.http_deferred (v int UNIQUE DEFERRABLE INITIALLY DEFERRED)`,
  );
  await pool.query(
    `INSERT INTO ${s}.http_deferred (v) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM ${s}.http_deferred)`,
  );
  // The two rows a route writes after it answered (/after-response): both or neither may commit.
  await pool.query(`CREATE TABLE IF NOT EXISTS ${s}.http_pairs (
    seq bigserial PRIMARY KEY, key text NOT NULL, part text NOT NULL)`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The routes. `input` is `{ principal, key, body }` (body parsed as JSON, `{}` when empty). Each
 * returns `{ status, headers: [[name, value]], json }`.
 * `input.steer` (headers outside the fingerprint, see steerOf) steers the handler: `status`
 * answers that status after the write, `throw` throws after it, `deferred` breaks the deferred
 * constraint, `holdMs` holds the claim that long, `publish` writes an outbox row, `dieAfterCommit`
 * (server.mjs only) SIGKILLs the process after a success's COMMIT, before its response,
 * `swallow` swallows a failed query (/swallow), `afterMs` spaces the late writes of /after-response.
 * `input.request` is the `x-request-id` header: what names a request without a key.
 */
export function createRoutes({ pool, schema }) {
  const s = `"${schema}"`;
  const effect = (q, route, input, attempt = 1) =>
    q.query(
      `INSERT INTO ${s}.http_effects (route, principal, key, attempt) VALUES ($1, $2, $3, $4) RETURNING seq`,
      [route, input.principal, input.key || input.request || '', attempt],
    );
  return {
    /** POST /charges: one effect in the key's transaction. */
    async charge(ctx, input) {
      const b = input.steer;
      const { rows } = await effect(ctx.tx, 'charges', input);
      if (b.publish) await ctx.publish('charges', { key: input.key });
      if (b.deferred) await ctx.tx.query(`INSERT INTO ${s}.http_deferred (v) VALUES (1)`);
      if (b.holdMs) await sleep(b.holdMs);
      if (b.throw) throw new Error('handler threw on purpose');
      const status = b.status ?? 201;
      return {
        status,
        headers: [
          ['x-charge-seq', String(rows[0].seq)],
          ['keep-alive', 'timeout=5'],
          ['set-cookie', 'a=1'],
          ['set-cookie', 'b=2'],
        ],
        json: {
          charge: rows[0].seq,
          key: input.key,
          principal: input.principal,
          amount: input.body.amount ?? null,
        },
      };
    },
    /**
     * POST /swallow: one effect; with `x-swallow: 1` a query fails and the handler swallows the
     * error (its transaction is aborted, so nothing of it may commit), then answers 201 anyway.
     */
    async swallow(ctx, input) {
      const { rows } = await effect(ctx.tx, 'swallow', input);
      if (input.steer.swallow) await ctx.tx.query('SELECT 1/0').catch(() => undefined);
      return {
        status: 201,
        headers: [],
        json: { charge: rows[0].seq, key: input.key ?? null, request: input.request ?? null },
      };
    },
    /**
     * The answer of POST /after-response before its late writes: one effect, 201. The binding
     * sends it and then calls writePair.
     */
    async answerFirst(ctx, input) {
      const { rows } = await effect(ctx.tx, 'after-response', input);
      return {
        status: 201,
        headers: [],
        json: { charge: rows[0].seq, key: input.key ?? null, request: input.request ?? null },
      };
    },
    /**
     * The two writes of a pair, after the route answered, each after a random delay of up to
     * `x-after-ms`; resolves with 'written' or the error code that stopped them (TX_REVOKED when
     * the binding ended the route at its answer). Also recorded in `pairOutcomes`.
     */
    async writePair(ctx, input) {
      const id = input.key || input.request || '';
      const max = input.steer.afterMs ?? 0;
      let outcome = 'written';
      try {
        await sleep(Math.random() * max);
        await ctx.tx.query(`INSERT INTO ${s}.http_pairs (key, part) VALUES ($1, 'a')`, [id]);
        await sleep(Math.random() * max);
        await ctx.tx.query(`INSERT INTO ${s}.http_pairs (key, part) VALUES ($1, 'b')`, [id]);
      } catch (err) {
        outcome = err?.code ?? String(err);
      }
      pairOutcomes.set(id, outcome);
      return outcome;
    },
    /** POST /naive: the same effect with no key at all (the control that duplicates). */
    async naive(input) {
      const { rows } = await effect(pool, 'naive', input);
      if (input.steer.dieAfterCommit) {
        // The control's crash between the effect (committed: no transaction here) and the
        // response, once per key: the retry runs the effect again, and then answers.
        const done = await pool.query(
          `SELECT count(*)::int AS n FROM ${s}.http_effects WHERE route = 'naive' AND key = $1`,
          [input.key ?? ''],
        );
        if (done.rows[0].n === 1) process.kill(process.pid, 'SIGKILL');
      }
      if (input.steer.holdMs) await sleep(input.steer.holdMs);
      return { status: 201, headers: [], json: { charge: rows[0].seq, key: input.key } };
    },
    /**
     * POST /lease-charges (lease mode): two outside calls as steps, then the effect row. With
     * `holdAfterA` it prints `{"event":"step-a","key":...}` and waits there (for a SIGKILL).
     */
    async leaseCharge(ctx, input) {
      const b = input.steer;
      const call = (step) =>
        ctx.step(step, async () => {
          await pool.query(`INSERT INTO ${s}.http_external (idem_key, key, step) VALUES ($1, $2, $3)`, [
            ctx.idempotencyKey(step),
            input.key,
            step,
          ]);
          return { step };
        });
      await call('a');
      if (b.holdAfterA && ctx.attempt === 1) {
        console.log(JSON.stringify({ event: 'step-a', key: input.key }));
        await sleep(b.holdAfterA);
      }
      await call('b');
      await effect(ctx.tx, 'lease-charges', input, ctx.attempt);
      return { status: 201, headers: [], json: { key: input.key, attempt: ctx.attempt } };
    },
  };
}

/** How each /after-response request's late writes ended, by key (or x-request-id): in-process tests read it. */
export const pairOutcomes = new Map();

/** The request's principal: the test's stand-in for authentication. */
export function principalOf(headers) {
  const get = typeof headers.get === 'function' ? (n) => headers.get(n) : (n) => headers[n];
  return get('x-principal') ?? 'anonymous';
}

/** The steering headers (not in the fingerprint, so a retry may steer differently). */
export function steerOf(headers) {
  const get = typeof headers.get === 'function' ? (n) => headers.get(n) : (n) => headers[n];
  const num = (n) => (get(n) ? Number(get(n)) : undefined);
  return {
    status: num('x-status'),
    throw: get('x-throw') === '1',
    deferred: get('x-deferred') === '1',
    publish: get('x-publish') === '1',
    holdMs: num('x-hold-ms'),
    holdAfterA: num('x-hold-after-a'),
    dieAfterCommit: get('x-die-after-commit') === '1',
    swallow: get('x-swallow') === '1',
    afterMs: num('x-after-ms'),
  };
}

/** A route result as bytes. */
export function encode(result) {
  return {
    status: result.status,
    headers: [['content-type', 'application/json'], ...result.headers],
    body: Buffer.from(JSON.stringify(result.json)),
  };
}

export function parseBody(bytes) {
  return bytes.length === 0 ? {} : JSON.parse(Buffer.from(bytes).toString('utf8'));
}
