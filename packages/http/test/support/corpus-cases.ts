// The failure-path corpus for @once/http: what a client can really send and what a handler can
// really do wrong, each with the state it must end in, the same through every binding. Run by
// test/integration/corpus.test.ts. `act` is the handler's behaviour on the key's first attempt
// (a retry with the same key runs the plain charge unless `retryAct` says otherwise).
import { PermanentError } from '@once/core';
import type pg from 'pg';

export type BindingName = 'fetch' | 'node' | 'fastify' | 'express';

/** What the handler sees: the binding's ctx and the test's pool and schema. */
export interface ActInput {
  readonly ctx: { readonly tx: pg.PoolClient | pg.ClientBase };
  readonly pool: pg.Pool;
  readonly schema: string;
  readonly key: string;
  /** Inserts the case's one effect row in the key's transaction. */
  readonly effect: () => Promise<void>;
}
/** A handler behaviour: returns a status (the charge's JSON is sent with it) or throws. */
export type Act = (a: ActInput) => Promise<number>;

/** What a key must leave behind: no inbox row, a stored response of `status`, or a 'done' row. */
export type Stored = { readonly kind: 'nothing' } | { readonly kind: 'response'; readonly status: number };

export interface Expect {
  /** The response status. */
  readonly status: number;
  /** The problem type's anchor (application/problem+json answers from @once/http). */
  readonly problem?: string;
  readonly stored: Stored;
  /** Effect rows committed for the key. */
  readonly effects: number;
}

export interface CorpusCase {
  readonly name: string;
  /** The request; defaults: a fresh valid key, `{"amount":100}` as application/json. */
  readonly request?: {
    /** The Idempotency-Key field value(s) as sent; `key` is replaced by the case's fresh key. */
    readonly keyHeader?: (key: string) => string | string[];
    readonly body?: Buffer;
    readonly contentType?: string;
  };
  /** Which server: the normal one, or one whose engine points at a schema that does not exist. */
  readonly server?: 'normal' | 'missing-schema';
  readonly act?: Act;
  readonly expect: Expect;
  /** Per-binding overrides of `expect` where the binding answers before the engine does. */
  readonly byBinding?: Partial<Record<BindingName, Expect>>;
  /** The retry: the same key (and the same request unless `retryRequest`), and its end state. */
  readonly retry?: {
    readonly act?: Act;
    readonly request?: CorpusCase['request'];
    readonly expect: Expect & { readonly replayed: boolean };
    readonly byBinding?: Partial<Record<BindingName, Expect & { readonly replayed: boolean }>>;
  };
  /** Bindings that cannot express the case, with why. */
  readonly notApplicable?: Partial<Record<BindingName, string>>;
  /**
   * Bindings where the case is known to end wrong today (a src bug, reported): run as `it.fails`,
   * so the test turns red once the bug is fixed and the mark must go.
   */
  readonly knownBug?: Partial<Record<BindingName, string>>;
}

const nothing: Stored = { kind: 'nothing' };
const response = (status: number): Stored => ({ kind: 'response', status });
const throwing =
  (value: unknown): Act =>
  async ({ effect }) => {
    await effect();
    throw value;
  };
const answering =
  (status: number): Act =>
  async ({ effect }) => {
    await effect();
    return status;
  };
/** The retry that runs again and succeeds. */
const succeeds = { expect: { status: 201, stored: response(201), effects: 1, replayed: false } };
/** The retry that gets the stored response back. */
const replays = (status: number) => ({
  expect: { status, stored: response(status), effects: status < 400 ? 1 : 0, replayed: true },
});
const JSON_TYPE = 'application/json';
const MAX_KEY = 255;

export const CORPUS: readonly CorpusCase[] = [
  ...(
    [
      ['a string', 'boom'],
      ['null', null],
      ['a plain object', { code: 'E_SOMETHING' }],
      ['a PermanentError', new PermanentError('never retry this')],
    ] as const
  ).map(
    ([what, value]): CorpusCase => ({
      name: `handler throws ${what}: 500, nothing stored, the retry runs`,
      act: throwing(value),
      expect: { status: 500, stored: nothing, effects: 0 },
      retry: succeeds,
    }),
  ),
  {
    name: 'handler returns 503: not stored, the retry runs',
    act: answering(503),
    expect: { status: 503, stored: nothing, effects: 0 },
    retry: succeeds,
  },
  {
    name: 'handler returns 400: stored with the writes rolled back, the retry replays it',
    act: answering(400),
    expect: { status: 400, stored: response(400), effects: 0 },
    retry: replays(400),
  },
  ...[408, 409, 425, 429].map(
    (status): CorpusCase => ({
      name: `handler returns ${status}: never stored, the retry runs`,
      act: answering(status),
      expect: { status, stored: nothing, effects: 0 },
      retry: succeeds,
    }),
  ),
  {
    name: 'a deferred constraint fails at COMMIT: 5xx, nothing stored, the retry succeeds on fixed data',
    act: async ({ ctx, effect, schema }) => {
      await effect();
      await ctx.tx.query(`INSERT INTO "${schema}".http_deferred (v) VALUES (1)`);
      return 201;
    },
    expect: { status: 500, stored: nothing, effects: 0 },
    retry: succeeds,
  },
  {
    name: 'handler swallows a failed query and answers 201: no 2xx stored over an aborted transaction',
    act: async ({ ctx, effect }) => {
      await effect();
      await ctx.tx.query('SELECT 1/0').catch(() => undefined);
      return 201;
    },
    expect: { status: 500, stored: nothing, effects: 0 },
    retry: succeeds,
  },
  {
    name: "the request's PostgreSQL backend is terminated mid-handler: 5xx, nothing stored, the retry succeeds",
    act: async ({ ctx, effect, pool }) => {
      await effect();
      const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await pool.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
      return 201;
    },
    expect: { status: 500, stored: nothing, effects: 0 },
    retry: succeeds,
  },
  {
    name: "handler runs past the engine's handlerTimeoutMs: rolled back, not 2xx, nothing stored",
    act: async ({ effect }) => {
      await effect();
      await new Promise((r) => setTimeout(r, HANDLER_TIMEOUT_MS + 1500));
      return 201;
    },
    expect: { status: 500, stored: nothing, effects: 0 },
    retry: succeeds,
  },
  {
    name: "once's schema is missing: 503, nothing stored",
    server: 'missing-schema',
    expect: { status: 503, problem: 'unavailable', stored: nothing, effects: 0 },
  },
  {
    name: 'a body that is not JSON on a JSON route: refused, nothing stored, nothing run',
    request: { body: Buffer.from('{"amount": 1,') },
    // fetch/node: the handler's own JSON.parse throws (a thrown error: 500, nothing stored).
    expect: { status: 500, stored: nothing, effects: 0 },
    byBinding: {
      fastify: { status: 400, stored: nothing, effects: 0 },
      express: { status: 400, stored: nothing, effects: 0 },
    },
  },
  {
    name: 'a body over the binding’s limit: 413, nothing stored',
    request: { body: Buffer.from(JSON.stringify({ amount: 1, pad: 'x'.repeat(2 * 1024 * 1024) })) },
    expect: { status: 413, stored: nothing, effects: 0 },
    notApplicable: {
      fetch: 'the Fetch binding has no body limit: the server in front of it (Hono, Next.js) owns it',
      node: 'the node:http adapter has no body limit of its own (it serves the Fetch binding)',
    },
  },
  {
    name: 'a JSON body holding invalid UTF-8 bytes: accepted, and the same bytes replay',
    request: {
      body: Buffer.concat([
        Buffer.from('{"amount":7,"note":"'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('"}'),
      ]),
    },
    expect: { status: 201, stored: response(201), effects: 1 },
    retry: replays(201),
  },
  {
    name: 'two Idempotency-Key fields: 400 key-invalid, nothing stored',
    request: { keyHeader: (k) => [k, `${k}-other`] },
    expect: { status: 400, problem: 'key-invalid', stored: nothing, effects: 0 },
  },
  {
    name: 'an Idempotency-Key holding a list: 400 key-invalid, nothing stored',
    request: { keyHeader: (k) => `"${k}", "${k}-other"` },
    expect: { status: 400, problem: 'key-invalid', stored: nothing, effects: 0 },
  },
  {
    name: `a key of exactly ${MAX_KEY} characters: accepted, the retry replays`,
    request: { keyHeader: (k) => k.padEnd(MAX_KEY, 'x') },
    expect: { status: 201, stored: response(201), effects: 1 },
    retry: replays(201),
  },
  {
    name: `a key of ${MAX_KEY + 1} characters: 400 key-invalid, nothing stored`,
    request: { keyHeader: (k) => k.padEnd(MAX_KEY + 1, 'x') },
    expect: { status: 400, problem: 'key-invalid', stored: nothing, effects: 0 },
  },
  {
    name: 'the retry sends the same JSON with its keys in another order: the same fingerprint, a replay',
    request: { body: Buffer.from('{"amount":5,"currency":"EUR"}') },
    expect: { status: 201, stored: response(201), effects: 1 },
    retry: { request: { body: Buffer.from('{ "currency": "EUR", "amount": 5 }') }, ...replays(201) },
  },
  {
    name: 'the retry sends another Content-Type (in the fingerprint by default): 422, nothing run',
    expect: { status: 201, stored: response(201), effects: 1 },
    retry: {
      request: { contentType: 'application/json; charset=utf-8' },
      expect: { status: 422, problem: 'key-mismatch', stored: response(201), effects: 1, replayed: false },
    },
  },
];

/** The engine's handler deadline in the corpus (short, so that case is quick). */
export const HANDLER_TIMEOUT_MS = 2000;
export { JSON_TYPE };
