import { ErrorCode, type PgPoolLike } from '@once/core';
import { createIdempotency, type IdempotentRequest } from '@once/http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

// `pool`, or `databases` and `route` (exactly one way), each field named when refused; and a
// request the router cannot place: 500 `unroutable`, and no database touched at all.

/** A pool that counts what was asked of it: an unplaced request must ask nothing. */
function countingPool(): PgPoolLike & { used: number } {
  const p = {
    used: 0,
    query: async () => {
      p.used++;
      throw new Error('this pool must not be used');
    },
    connect: async () => {
      p.used++;
      throw new Error('this pool must not be used');
    },
  };
  return p as unknown as PgPoolLike & { used: number };
}

const pool = countingPool();
const route = () => 'a';

describe('createIdempotency: pool, or databases and route', () => {
  it('takes one pool, or a set of databases with a router', () => {
    expect(createIdempotency({ pool, logger: false }).options.databases).toBeUndefined();
    const e = createIdempotency({ databases: { a: pool, 'b.2': countingPool() }, route, logger: false });
    expect([...e.options.databases!.keys()]).toEqual(['a', 'b.2']);
    expect(e.options.pool).toBeUndefined();
    expect(e.options.route).toBe(route);
    expect(e.inbox.databases).toEqual(['a', 'b.2']);
  });

  it('refuses both ways at once, and neither', () => {
    expect(() => createIdempotency({ pool, databases: { a: pool }, route })).toThrow(
      "createIdempotency: option 'databases' and 'pool' are two ways to name the database: give one of them",
    );
    expect(() => createIdempotency({} as never)).toThrow(
      "createIdempotency: option 'pool' must be a pg Pool (new pg.Pool(...)), or give 'databases' and 'route' instead",
    );
  });

  it('refuses route without databases, and databases without a route', () => {
    expect(() => createIdempotency({ pool, route })).toThrow(
      "createIdempotency: option 'route' is for an engine over several databases: give 'databases' too",
    );
    expect(() => createIdempotency({ databases: { a: pool } })).toThrow(
      "createIdempotency: option 'route' must be a function from a request to a database name, got undefined",
    );
    expect(() => createIdempotency({ databases: { a: pool }, route: 'a' as never })).toThrow(
      /option 'route' must be a function .*got string/,
    );
  });

  it('refuses a set that is empty, not an object, or holds a bad name or something not a pool', () => {
    const refused = (databases: unknown) => {
      try {
        createIdempotency({ databases: databases as never, route });
      } catch (err) {
        expect((err as { code?: string }).code).toBe(ErrorCode.InvalidOption);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused({})).toBe("createIdempotency: option 'databases' must name at least one database");
    expect(refused([pool])).toBe(
      "createIdempotency: option 'databases' must be an object of name → pool, got an array",
    );
    expect(refused(null)).toBe(
      "createIdempotency: option 'databases' must be an object of name → pool, got null",
    );
    expect(refused({ 'bad name': pool })).toBe(
      'createIdempotency: option \'databases.bad name\' is not a database name: 1 to 63 characters of [A-Za-z0-9_.-], got "bad name"',
    );
    expect(refused({ ['x'.repeat(64)]: pool })).toMatch(/option 'databases\.x+' is not a database name/);
    expect(refused({ a: pool, b: {} })).toBe(
      "createIdempotency: option 'databases.b' must be a pg Pool, got object",
    );
    expect(refused({ a: 'postgres://' })).toBe(
      "createIdempotency: option 'databases.a' must be a pg Pool, got string",
    );
  });
});

const request = (key: string | undefined, tenant: string): IdempotentRequest => ({
  method: 'POST',
  target: `/${tenant}/charges`,
  headers: { 'x-tenant': tenant, ...(key === undefined ? {} : { 'idempotency-key': key }) },
  body: Buffer.from('{}'),
});

describe('a request the router cannot place', () => {
  it('is answered 500 unroutable naming the cause, with or without a key, and touches no database (property)', async () => {
    const names = ['t0', 't1', 't2'];
    await fc.assert(
      fc.asyncProperty(
        // What a router may do wrong: throw anything, or answer anything that is no name of the set.
        fc.oneof(
          fc.record({ throws: fc.oneof(fc.string(), fc.anything()) }),
          fc.record({
            gives: fc.oneof(
              fc.string().filter((s) => !names.includes(s)),
              fc.constantFrom('T0', 't0 ', ' t1', 't3', ''),
              fc.anything().filter((v) => typeof v !== 'string'),
            ),
          }),
        ),
        fc.option(fc.stringMatching(/^[a-z0-9-]{1,20}$/), { nil: undefined }),
        async (wrong, key) => {
          const pools = names.map(() => countingPool());
          let ran = false;
          const engine = createIdempotency({
            databases: Object.fromEntries(names.map((n, i) => [n, pools[i]!])),
            route: () => {
              if ('throws' in wrong) {
                throw typeof wrong.throws === 'string' ? new Error(wrong.throws) : wrong.throws;
              }
              return wrong.gives as string;
            },
            logger: false,
          });
          const r = await engine.handle(
            request(key, 't0'),
            'acct',
            async () => {
              ran = true;
              return { status: 201, headers: [], body: Buffer.alloc(0) };
            },
            { required: false },
          );
          expect(ran).toBe(false);
          expect(pools.map((p) => p.used)).toEqual([0, 0, 0]);
          expect(r.status).toBe('failed');
          expect(r.response.status).toBe(500);
          expect(r.error).toMatchObject({ code: ErrorCode.Unroutable });
          const body = JSON.parse(Buffer.from(r.response.body).toString('utf8'));
          expect(body.type).toMatch(/docs\/http\.md#unroutable$/);
          expect(body.status).toBe(500);
          expect(body.detail).toMatch(
            'throws' in wrong
              ? /^the request could not be placed in a database: route\(\) threw: /
              : /^the request could not be placed in a database: route\(\) gave .*, which names no database; nothing ran and nothing was recorded$/,
          );
          // The other databases of the set are not named to the client.
          for (const n of names) expect(body.detail.includes(`'${n}'`)).toBe(false);
          expect(body.detail).not.toMatch(/t0, t1, t2/);
          expect(body.detail.length).toBeLessThan(2000);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("gives the router's message as the cause, and the problem in Stripe's shape with formatProblem", async () => {
    const { stripeProblemFormat } = await import('@once/http');
    const engine = createIdempotency({
      databases: { a: countingPool() },
      route: (req) => {
        throw new Error(`no tenant ${req.headers['x-tenant']}`);
      },
      formatProblem: stripeProblemFormat,
      logger: false,
    });
    const r = await engine.handle(request('k1', 'acme'), 'acct', async () => {
      throw new Error('must not run');
    });
    expect(r.response.status).toBe(500);
    expect(JSON.parse(Buffer.from(r.response.body).toString('utf8'))).toMatchObject({
      error: {
        type: 'api_error',
        code: 'unroutable',
        message:
          'the request could not be placed in a database: route() threw: no tenant acme; nothing ran and nothing was recorded',
      },
    });
  });

  it('shows a long answer of the router cut, never whole', async () => {
    const engine = createIdempotency({
      databases: { a: countingPool() },
      route: () => 'x'.repeat(5000),
      logger: false,
    });
    const r = await engine.handle(request('k1', 'a'), 'acct', async () => {
      throw new Error('must not run');
    });
    const body = JSON.parse(Buffer.from(r.response.body).toString('utf8'));
    expect(body.detail).toBe(
      `the request could not be placed in a database: route() gave "${'x'.repeat(63)}…", which names no database; nothing ran and nothing was recorded`,
    );
  });

  it('is not asked for a request refused before it needs a database (a missing or invalid key)', async () => {
    let asked = 0;
    const engine = createIdempotency({
      databases: { a: countingPool() },
      route: () => {
        asked++;
        return 'a';
      },
      logger: false,
    });
    const run = async () => ({ status: 201, headers: [], body: Buffer.alloc(0) });
    expect((await engine.handle(request(undefined, 'a'), 'acct', run)).response.status).toBe(400);
    expect((await engine.handle(request('a,b', 'a'), 'acct', run)).response.status).toBe(400);
    expect(asked).toBe(0);
  });
});
