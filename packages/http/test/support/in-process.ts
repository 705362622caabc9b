import { migrate } from '@once/core';
import { createIdempotency, type HandleResult, type IdempotencyOptions } from '@once/http';
import type pg from 'pg';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenExpress } from './bindings/express.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFastify } from './bindings/fastify.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFetch } from './bindings/fetch.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenNode } from './bindings/node.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { createRoutes, createTestTables, pairOutcomes } from './routes.mjs';

// The test application of bindings/*.mjs served in the test's own process, on a schema of its
// own, for the integration tests that need a binding and the ledger but no child process.

export type BindingName = 'fetch' | 'node' | 'fastify' | 'express';
export const BINDING_NAMES: readonly BindingName[] = ['fetch', 'node', 'fastify', 'express'];

type Listen = (o: unknown) => Promise<{ port: number; close: () => Promise<void> }>;
const LISTEN: Record<BindingName, Listen> = {
  fetch: listenFetch as Listen,
  node: listenNode as Listen,
  fastify: listenFastify as Listen,
  express: listenExpress as Listen,
};

/** How each /after-response request's late writes ended, by key or request id. */
export const pairs: Map<string, string> = pairOutcomes as Map<string, string>;

/** A binding's test application on its own schema. */
export interface BindingApp {
  readonly name: BindingName;
  readonly pool: pg.Pool;
  readonly schema: string;
  readonly base: string;
  readonly results: HandleResult[];
  /** POSTs `body` (JSON unless a Buffer or string) to `path` with `key` (none when undefined). */
  post(
    path: string,
    key: string | undefined,
    opts?: { principal?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<Response>;
  /** Effect rows committed for `key` (or request id). */
  effects(key: string): Promise<number>;
  close(): Promise<void>;
}

/** Starts `name`'s application with an engine made of `engine` options (pool and schema are its own). */
export async function startBinding(
  name: BindingName,
  engine: Partial<IdempotencyOptions> = {},
): Promise<BindingApp> {
  const pool = createTestPool({ max: 5 });
  const schema = freshSchemaName(`http_${name}`);
  await migrate(pool, { schema });
  await createTestTables(pool, schema);
  const results: HandleResult[] = [];
  const server = await LISTEN[name]({
    engine: createIdempotency({ pool, schema, consumer: 'http.test', logger: false, ...engine }),
    routes: createRoutes({ pool, schema }),
    onResult: (r: HandleResult, request: { headers: unknown }) => {
      results.push(r);
      // x-throw-in-on-result: the hook throws, which must change nothing
      const h = request.headers as { get?: (n: string) => string | null } & Record<string, unknown>;
      if ((typeof h.get === 'function' ? h.get('x-throw-in-on-result') : h['x-throw-in-on-result']) === '1') {
        throw new Error('onResult threw on purpose');
      }
    },
  });
  const base = `http://127.0.0.1:${server.port}`;
  return {
    name,
    pool,
    schema,
    base,
    results,
    post: (path, key, opts = {}) => {
      const body = opts.body ?? { amount: 100 };
      return fetch(`${base}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-principal': opts.principal ?? 'alice',
          ...(key === undefined ? {} : { 'idempotency-key': key }),
          ...opts.headers,
        },
        body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
      });
    },
    effects: async (key) => {
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM "${schema}".http_effects WHERE key = $1`,
        [key],
      );
      return rows[0].n as number;
    },
    close: async () => {
      await server.close();
      await dropSchema(pool, schema);
      await pool.end();
    },
  };
}
