import { migrate } from '@once/core';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';
import { bodyOf, type Ending, type Exchange, exchange } from '../support/raw-http.js';
// @ts-expect-error plain JavaScript shared with the child server processes
import { createTestTables } from '../support/routes.mjs';
import { TestServer } from '../support/two-servers.js';

// Malformed-request fuzzing of every binding (issue #26, item 1 and "how to keep it from coming
// back"): a raw-socket client sends each binding's server process (server.mjs, on the built dist/)
// more than 2,000 malformed or cut requests: the keyed request cut at every byte offset, bad Host
// values, bad chunked encodings, oversized headers, broken request and header lines, random byte
// mutations, clients that reset, and stalls that only the server's lowered headersTimeout and
// requestTimeout end; good keyed requests (and their replays) go between them. The server must
// never exit nor record an unhandled rejection or uncaught exception, every good request must get
// its own answer, and the ledger must show one effect per key. The cases come from a seeded
// generator; the seed is printed (SEED=<n> reruns one).

const SEED = Number(process.env.SEED ?? 26);
const BINDINGS = ['fetch', 'node', 'fastify', 'express'] as const;
const CONCURRENCY = 48;
const PRINCIPAL = 'fuzz';
// Low enough that stalls end quickly, high enough that a good request sent in one write is read
// whole before it even when the server process is starved of CPU (CI runs other test files
// beside this one: at 0.5 / 1 s, good requests got 408 under a load average of 18 on 2 cores).
const HEADERS_TIMEOUT_MS = 2_000;
const REQUEST_TIMEOUT_MS = 4_000;

/** A seeded choice maker (mulberry32): the same seed, the same cases. */
function rngOf(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    int: (n: number) => Math.floor(next() * n),
    chance: (p: number) => next() < p,
    pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T,
  };
}
type Rng = ReturnType<typeof rngOf>;

interface Case {
  readonly family: string;
  readonly bytes: Buffer;
  readonly ending: Ending;
  /** Checks the server's answer (beyond "the server lives"). */
  readonly check?: ((x: Exchange) => void) | undefined;
}

const BODY = '{"amount":100}';

function request(o: {
  method?: string;
  target?: string;
  host?: string | null;
  key?: string | null;
  headers?: string[];
  body?: string | Buffer;
  length?: string | null;
}): Buffer {
  const body = Buffer.isBuffer(o.body) ? o.body : Buffer.from(o.body ?? BODY);
  const lines = [
    `${o.method ?? 'POST'} ${o.target ?? '/charges'} HTTP/1.1`,
    ...(o.host === null ? [] : [`Host: ${o.host ?? '127.0.0.1'}`]),
    'Content-Type: application/json',
    `X-Principal: ${PRINCIPAL}`,
    ...(o.key === null || o.key === undefined ? [] : [`Idempotency-Key: ${o.key}`]),
    ...(o.headers ?? []),
    ...(o.length === null ? [] : [`Content-Length: ${o.length ?? body.length}`]),
    'Connection: close',
  ];
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body]);
}

const noSuccess = (x: Exchange) =>
  expect(x.status < 200 || x.status >= 300, x.data.toString('latin1').slice(0, 200)).toBe(true);

/** The malformed and cut requests, in a seeded order. */
function malformedCases(rng: Rng, fresh: () => string, cutKey: string, fetchLike: boolean): Case[] {
  const cases: Case[] = [];
  // 1. The keyed request cut at every byte offset (a FIN, some a reset, some a stall that the
  //    server's timeouts end): never run.
  const full = request({ key: cutKey });
  for (let i = 0; i < full.length; i++) {
    cases.push({
      family: 'cut',
      bytes: full.subarray(0, i),
      ending: i % 7 === 3 ? 'rst' : i % 20 === 11 ? 'wait' : 'fin',
      check: noSuccess,
    });
  }
  // 2. Bad Host values.
  for (const host of [
    'a b',
    '[::1',
    'user@host',
    'a/b',
    '%zz',
    'ex ample:99999',
    ':80',
    '[zz]',
    'x'.repeat(300),
    'h\u00e9',
  ]) {
    cases.push({
      family: 'bad-host',
      bytes: request({ key: fresh(), host }),
      ending: 'wait',
      // the Fetch-based bindings build a URL from Host: one that cannot be a host is a 400
      check:
        fetchLike && (host === 'a b' || host === '[::1' || host === 'ex ample:99999' || host === '[zz]')
          ? (x) => expect(x.status).toBe(400)
          : undefined,
    });
  }
  cases.push({
    family: 'bad-host',
    bytes: request({ key: fresh(), headers: ['Host: other'] }),
    ending: 'wait',
  });
  cases.push({
    family: 'bad-host',
    bytes: request({ key: fresh(), host: null }),
    ending: 'wait',
    check: noSuccess,
  });
  // 3. Bad chunked encodings.
  const chunked = (body: string, extra: string[] = []) =>
    request({ key: fresh(), length: null, headers: ['Transfer-Encoding: chunked', ...extra], body });
  for (const body of [
    'zz\r\n{}\r\n0\r\n\r\n',
    '5\r\n{"amount":1}\r\n0\r\n\r\n',
    'ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n',
    '-1\r\n{}\r\n0\r\n\r\n',
    '3;ext=\u0001\r\nabc\r\n0\r\n\r\n',
    '3\r\nabc',
    'e\nabc\n0\n\n',
    '0\r\nX-Trailer: a\r\n',
    '2\r\n{}\r\n0\r\n\r\nGARBAGE',
    '\r\n\r\n',
    '1\r\n{\r\n1\r\n}', // cut before the last chunk
  ]) {
    cases.push({ family: 'chunked', bytes: chunked(body), ending: 'wait', check: noSuccess });
  }
  cases.push({
    family: 'chunked',
    bytes: chunked('2\r\n{}\r\n0\r\n\r\n', ['Content-Length: 2']),
    ending: 'wait',
    check: noSuccess,
  });
  for (const te of ['chunked, identity', 'gzip', 'xchunked', 'chunked, chunked', 'identity']) {
    cases.push({
      family: 'chunked',
      bytes: request({
        key: fresh(),
        length: null,
        headers: [`Transfer-Encoding: ${te}`],
        body: '2\r\n{}\r\n0\r\n\r\n',
      }),
      ending: 'wait',
    });
  }
  // 4. Oversized headers and targets (past Node's 16 KiB).
  cases.push({
    family: 'oversized',
    bytes: request({ key: fresh(), headers: [`X-Big: ${'a'.repeat(20_000)}`] }),
    ending: 'wait',
    check: (x) => expect(x.status).toBe(431),
  });
  cases.push({
    family: 'oversized',
    bytes: request({ key: fresh(), target: `/charges?${'q'.repeat(20_000)}` }),
    ending: 'wait',
    check: noSuccess,
  });
  cases.push({
    family: 'oversized',
    bytes: request({ key: fresh(), headers: Array.from({ length: 2_100 }, (_, i) => `X-H${i}: v`) }),
    ending: 'wait',
  });
  cases.push({
    family: 'oversized',
    bytes: request({ key: 'k'.repeat(10_000) }),
    ending: 'wait',
    check: noSuccess,
  });
  // 5. Broken request lines, header lines, lengths and keys.
  const broken: Array<[Buffer, ((x: Exchange) => void) | undefined]> = [
    [request({ key: fresh(), headers: ['Bad Header: x'] }), noSuccess],
    [request({ key: fresh(), headers: ['X-A : b'] }), noSuccess],
    [request({ key: fresh(), headers: ['X-NoColon'] }), noSuccess],
    [request({ key: fresh(), headers: ['X-Nul: a\u0000b'] }), noSuccess],
    [request({ key: fresh(), headers: ['X-\u007f: a'] }), noSuccess],
    [request({ key: fresh(), headers: ['X-Fold: a', ' continued'] }), undefined],
    [request({ key: fresh(), method: 'P@ST' }), noSuccess],
    [request({ key: fresh(), method: 'post' }), noSuccess],
    [request({ key: fresh(), method: 'TRACE' }), noSuccess],
    [request({ key: fresh(), method: 'CONNECT', target: '127.0.0.1:1' }), noSuccess],
    [request({ key: fresh(), target: '*' }), undefined],
    [request({ key: fresh(), target: 'http://127.0.0.1/charges' }), undefined],
    [request({ key: fresh(), target: '/charges#frag' }), undefined],
    [request({ key: fresh(), target: '/charges?\u00e9=\u00ff' }), undefined],
    [request({ key: fresh(), target: '/char\u0000ges' }), noSuccess],
    [request({ key: fresh(), target: 'charges' }), noSuccess],
    [request({ key: fresh(), target: '//charges' }), undefined],
    [request({ key: fresh(), target: '/charges/../charges' }), undefined],
    [request({ key: fresh(), length: '-1' }), noSuccess],
    [request({ key: fresh(), length: '+14' }), noSuccess],
    [request({ key: fresh(), length: '14, 14' }), undefined],
    [request({ key: fresh(), length: '999999999999' }), noSuccess],
    [request({ key: fresh(), length: '14', headers: ['Content-Length: 15'] }), noSuccess],
    [request({ key: fresh(), headers: ['Expect: 100-continue'] }), undefined],
    [request({ key: fresh(), headers: ['Expect: something-else'] }), noSuccess],
    [request({ key: fresh(), headers: [`Idempotency-Key: ${fresh()}`] }), noSuccess],
    [request({ key: 'caf\u00e9' }), noSuccess],
    [request({ key: 'x'.repeat(300) }), noSuccess],
    [request({ key: '' }), noSuccess],
    [request({ key: '"unterminated' }), noSuccess],
    [request({ key: fresh(), body: '{"amount":' }), noSuccess],
    [request({ key: fresh(), body: Buffer.from([0xff, 0xfe, 0x00]) }), noSuccess],
    [Buffer.from(`POST /charges HTTP/2.0\r\nHost: a\r\n\r\n`), noSuccess],
    [Buffer.from(`POST /charges HTTP/1.1 extra\r\nHost: a\r\n\r\n`), noSuccess],
    [Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), noSuccess],
    [Buffer.from('\r\n\r\n\r\n'), noSuccess],
    [
      Buffer.from('POST /charges HTTP/1.1\nHost: a\nIdempotency-Key: lf-only\nContent-Length: 2\n\n{}'),
      undefined,
    ],
    [Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00]), noSuccess], // a TLS ClientHello
    [Buffer.concat([request({ key: fresh() }), request({ key: fresh() })]), undefined], // pipelined after Connection: close
  ];
  for (const [bytes, check] of broken) {
    cases.push({ family: 'broken', bytes, ending: 'wait', check });
    cases.push({ family: 'broken', bytes, ending: 'fin', check: check && noSuccess });
  }
  // 6. Random mutations of a keyed request, each with its own key (some stay valid, and run once).
  const interesting = [0x0d, 0x0a, 0x00, 0x20, 0x3a, 0x80, 0xff, 0x61, 0x22, 0x7b, 0x25];
  while (cases.length < 2_100) {
    let b = Buffer.from(request({ key: fresh() }));
    for (let ops = 1 + rng.int(3); ops > 0; ops--) {
      const at = rng.int(b.length);
      const op = rng.int(6);
      if (op === 0) b[at] = rng.int(256);
      else if (op === 1)
        b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + 1 + rng.int(8)))]);
      else if (op === 2)
        b = Buffer.concat([b.subarray(0, at), Buffer.from([rng.pick(interesting)]), b.subarray(at)]);
      else if (op === 3) b = b.subarray(0, at);
      else if (op === 4) b = Buffer.from(b.toString('latin1').replace(/\r\n/, '\n'), 'latin1');
      else {
        const lines = b.toString('latin1').split('\r\n');
        const i = 1 + rng.int(Math.max(1, lines.length - 3));
        lines.splice(i, 0, lines[i] ?? '');
        b = Buffer.from(lines.join('\r\n'), 'latin1');
      }
    }
    const r = rng.int(10);
    cases.push({ family: 'mutated', bytes: b, ending: r === 0 ? 'rst' : r < 5 ? 'fin' : 'wait' });
  }
  // a seeded order, so cuts, mutations and broken lines interleave
  for (let i = cases.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [cases[i], cases[j]] = [cases[j] as Case, cases[i] as Case];
  }
  return cases;
}

/** Stalled clients: only the server's lowered timeouts end them. */
function stalls(fresh: () => string): Case[] {
  const full = request({ key: fresh() });
  const headEnd = full.indexOf('\r\n\r\n') + 4;
  return [
    { family: 'stall', bytes: Buffer.alloc(0), ending: 'stall' },
    { family: 'stall', bytes: full.subarray(0, 10), ending: 'stall' },
    { family: 'stall', bytes: full.subarray(0, headEnd - 2), ending: 'stall' },
    {
      family: 'stall',
      bytes: request({ key: fresh() }).subarray(0, headEnd + 3),
      ending: 'stall',
      check: noSuccess,
    },
    { family: 'stall', bytes: request({ key: fresh(), length: '1000' }), ending: 'stall', check: noSuccess },
    {
      family: 'stall',
      bytes: request({
        key: fresh(),
        length: null,
        headers: ['Transfer-Encoding: chunked'],
        body: '5\r\n{"a":',
      }),
      ending: 'stall',
      check: noSuccess,
    },
  ];
}

// The four bindings' servers are fuzzed at the same time (each its own process and schema): the
// stalls of one overlap the work of the others.
describe.concurrent.each(BINDINGS)('%s binding under malformed and cut requests', (binding) => {
  let pool: pg.Pool;
  let schema: string;
  let server: TestServer;
  let pid: number;

  beforeAll(async () => {
    pool = createTestPool({ max: 3 });
    schema = freshSchemaName(`http_fuzz_${binding}`);
    await migrate(pool, { schema });
    await createTestTables(pool, schema);
    server = new TestServer(binding, {
      HTTP_SCHEMA: schema,
      HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      HTTP_CHECK_INTERVAL_MS: '100',
    });
    await server.start();
    const line = server.child.lines.find((l) => (l.json as { event?: string })?.event === 'listening');
    pid = (line?.json as { pid?: number } | undefined)?.pid ?? -1;
  });
  afterAll(async () => {
    await server?.kill();
    await dropSchema(pool, schema);
    await pool.end();
  });

  const faults = () =>
    server.child.lines
      .filter((l) => (l.json as { event?: string } | undefined)?.event === 'fault')
      .map((l) => l.text);
  const alive = () => {
    expect(faults()).toEqual([]);
    expect(server.child.running).toBe(true);
    expect(server.child.runs).toBe(1);
    expect(server.child.process?.pid).toBe(pid);
  };
  const effects = async (key: string) =>
    (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".http_effects WHERE key = $1`, [key]))
      .rows[0].n as number;

  let n = 0;
  const fresh = () => `fz-${binding}-${++n}-${Math.random().toString(36).slice(2, 8)}`;

  /** One good keyed request: 201 (or its replay), its own key in the body. */
  const good = async (key: string, replay: boolean) => {
    const x = await exchange(server.port, request({ key }), 'wait');
    expect(
      x.status,
      `${x.error} ${x.data.toString('latin1').slice(0, 300)} ${faults().join('\n')} ${server.child.stderr.slice(-2000)}`,
    ).toBe(201);
    const json = JSON.parse(bodyOf(x.data).toString('utf8')) as { key: string; charge: string };
    expect(json.key).toBe(key);
    expect(/\r\nidempotent-replayed: true\r\n/i.test(x.data.toString('latin1'))).toBe(replay);
    return json.charge;
  };

  it('answers 400 to Host: a b and closes on a client that left mid-body, and lives (item 1)', async () => {
    const bad = await exchange(server.port, request({ key: fresh(), host: 'a b' }), 'wait');
    const full = request({ key: fresh() });
    // a FIN mid-body: Node answers 400 to what it can still write to, then closes
    const left = await exchange(server.port, full.subarray(0, full.length - 5), 'fin');
    const reset = await exchange(server.port, full.subarray(0, full.length - 5), 'rst');
    // a fault, had there been one, is printed before the next request is answered
    await good(fresh(), false);
    alive();
    if (binding === 'fetch' || binding === 'node') expect(bad.status).toBe(400);
    noSuccess(left);
    expect(left.hung).toBe(false);
    expect(reset.hung).toBe(false);
  });

  it('lives through 2,000+ malformed, cut and stalled requests, answering every good one right', {
    timeout: 120_000,
  }, async () => {
    const rng = rngOf(SEED + BINDINGS.indexOf(binding));
    const cutKey = fresh();
    const cases = [
      ...stalls(fresh),
      ...malformedCases(rng, fresh, cutKey, binding === 'fetch' || binding === 'node'),
    ];
    const goodKeys = new Map<string, string>();
    const statuses = new Map<number, number>();
    const families = new Map<string, number>();
    let hung = 0;
    let replays = 0;
    let i = 0;
    const started = Date.now();
    const worker = async () => {
      for (let c = cases[i++]; c !== undefined; c = cases[i++]) {
        const index = i;
        const x = await exchange(
          server.port,
          c.bytes,
          c.ending,
          20_000,
          c.bytes.length > 40 && index % 3 === 0 ? 3 : 1,
        );
        if (x.hung) hung++;
        c.check?.(x);
        statuses.set(x.status, (statuses.get(x.status) ?? 0) + 1);
        families.set(c.family, (families.get(c.family) ?? 0) + 1);
        if (index % 25 === 0) {
          const key = fresh();
          goodKeys.set(key, await good(key, false));
        }
        if (index % 100 === 0 && goodKeys.size > 0) {
          const [key, charge] = [...goodKeys][rng.int(goodKeys.size)] as [string, string];
          expect(await good(key, true)).toBe(charge);
          replays++;
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    expect(hung).toBe(0);
    // the cut request's key never ran; the whole request runs it once
    expect(await effects(cutKey)).toBe(0);
    await good(cutKey, false);
    expect(await effects(cutKey)).toBe(1);
    for (const [key, charge] of goodKeys) {
      const { rows } = await pool.query(
        `SELECT seq::text AS seq FROM "${schema}".http_effects WHERE key = $1`,
        [key],
      );
      expect(rows).toEqual([{ seq: String(charge) }]);
    }
    const { rows: twice } = await pool.query(
      `SELECT key, count(*)::int AS n FROM "${schema}".http_effects WHERE principal = $1 GROUP BY key HAVING count(*) > 1`,
      [PRINCIPAL],
    );
    expect(twice).toEqual([]);
    alive();
    const { rows: ran } = await pool.query(
      `SELECT count(DISTINCT key)::int AS n FROM "${schema}".http_effects WHERE principal = $1`,
      [PRINCIPAL],
    );
    console.log(
      `${binding}: ${cases.length} malformed, cut or stalled requests (seed ${SEED}; ${[...families].map(([f, k]) => `${k} ${f}`).join(', ')}), ${goodKeys.size + 1} good keyed requests and ${replays} replays between them; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}; ${ran[0].n} keys ran, each once; ${Date.now() - started} ms`,
    );
  });
});
