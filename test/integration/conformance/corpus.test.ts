import { createHash, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createInbox, type Handler } from '@once/core';
import { describe, expect, it, vi } from 'vitest';
import { fromJsonb } from '../../../packages/core/src/sql/jsonb.js';
import { type Ledger, quoteIdent, startChild } from '../../support/index.js';
import { BROKERS } from './brokers.js';
import {
  type BadMessage,
  CORPUS_CASES,
  CORPUS_OPTIONS,
  type CorpusCase,
  type Expectation,
  misbehave,
  NUL_RESULT,
  resultOf,
} from './corpus-cases.js';
import type { BrokerName, DeadLetterDetail, OutMessage } from './harness.js';
import { waitFor } from './harness.js';
import { type BrokerUnderTest, useBroker } from './suite.js';

// Every case of corpus-cases.ts on every broker: the bad messages are published on one key
// between three good neighbours before and three after, and each must reach its own terminal
// state (see Expectation), found where an operator would look: the dead-letter destination (read
// from the broker) and the inbox row. The neighbours must all be processed; how long they waited
// is printed, not asserted. Waits are soft: a case that never ends fails on the comparison of what
// was seen with what was wanted, which names every message.

const NEIGHBOURS = 3;
const WAIT_MS = 20_000;

// Each case waits on its own consumer; most of the time goes to waiting, so run more at once.
vi.setConfig({ maxConcurrency: 10 });

/** How the suite's consumers make their effects once: the inbox's transaction, or a lease. */
type Mode = 'transaction' | 'lease';

/**
 * The lease every lease-mode consumer here holds: short, so that the process-exit case's killer
 * is taken over (and its claims counted) within seconds of each death.
 */
const LEASE_MS = 3_000;

/**
 * Lease mode runs the same corpus (issue #28: lease mode decides through the engine, so it must
 * end every case as transaction mode does). RabbitMQ in every run, the quickest broker here to
 * start and settle; all four with ONCE_LEASE_CORPUS=all (the long run).
 */
const LEASE_BROKERS =
  process.env.ONCE_LEASE_CORPUS === 'all' ? BROKERS : BROKERS.filter(([name]) => name === 'rabbitmq');

const suites = [
  ...BROKERS.map(([broker, make]) => [broker, 'transaction', make] as const),
  ...LEASE_BROKERS.map(([broker, make]) => [broker, 'lease', make] as const),
];

describe.concurrent.each(suites)('%s: bad-input corpus (%s mode)', (broker, mode, make) => {
  const t = useBroker(`conf_corpus_${mode === 'lease' ? 'l_' : ''}${broker}`, make);

  describe.concurrent('cases', () => {
    for (const [index, c] of CORPUS_CASES.entries()) {
      const na = c.notApplicable?.[broker];
      if (na) {
        it(`${c.name} [n/a on ${broker}: ${na.reason}]`, async () => {
          if (!na.check) return;
          const dest = await t.harness.create(`corpus-na-${broker}-${mode === 'lease' ? 'l' : ''}${index}`);
          await na.check(t.harness, dest, { broker, tag: tagOf(index, mode) });
        });
        continue;
      }
      it(c.name, async () => {
        await runCase(t, broker, c, index, mode);
      });
    }
  });

  it('a message that exits the process: dead-lettered after maxAttempts starts, neighbours processed', async () => {
    await runExitCase(t, broker, mode);
  });
});

const run = randomBytes(3).toString('hex');
const tagOf = (index: number, mode: Mode) => `c${index}${mode === 'lease' ? 'l' : ''}-${run}`;
const digest = (body: Buffer | string) => createHash('sha256').update(body).digest('hex').slice(0, 16);

/** Neighbours: good messages of the case's key, with JSON bodies (jsonHandler cases parse them). */
function neighbours(tag: string, where: 'before' | 'after', key: string): OutMessage[] {
  return Array.from({ length: NEIGHBOURS }, (_, i) => {
    const id = `${tag}-${where}-${i}`;
    return { id, key, body: JSON.stringify({ tag, where, n: i }) };
  });
}

interface Row {
  readonly status: string;
  readonly error: unknown;
  readonly bodyTruncated: boolean;
  readonly body: Buffer | null;
}

async function runCase(
  t: BrokerUnderTest,
  broker: BrokerName,
  c: CorpusCase,
  index: number,
  mode: Mode,
): Promise<void> {
  const { harness, db } = t;
  const tag = tagOf(index, mode);
  const key = `${tag}-key`;
  const consumer = `corpus-${index}`;
  const dest = await harness.create(`corpus-${broker}-${mode === 'lease' ? 'l' : ''}${index}`);
  const ledger = await db.ledger();
  const scratch = ledger.table.replace(/\.effects$/, '.scratch');
  await c.setup?.((sql) => db.pool.query(sql), scratch);

  const before = neighbours(tag, 'before', key);
  const after = neighbours(tag, 'after', key);
  const bad = c.bad({ broker, tag }).map((m) => ({ ...m, key }));
  const good = [...before, ...after].map((m) => m.id as string);

  const record: Handler = async (envelope, ctx) => {
    await c.before?.(envelope.body, ctx.tx, scratch);
    await ledger.record(ctx.tx, {
      messageId: ctx.id,
      key: envelope.key ?? '',
      payload: digest(envelope.body),
    });
    await misbehave(envelope.body);
    return resultOf(envelope.body);
  };
  const handler = c.json
    ? harness.jsonHandler!(async (_value, envelope, ctx) => record(envelope, ctx))
    : record;
  const duplicates = new Set<string>();
  const events: string[] = [];
  const note = (name: string, id: string | undefined, extra = '') =>
    events.push(`${name}${extra}:${id === undefined ? '(no id)' : JSON.stringify(id.slice(0, 40))}`);
  const options = { ...CORPUS_OPTIONS, ...c.options, ...(mode === 'lease' ? { leaseMs: LEASE_MS } : {}) };

  const publishedAt = Date.now();
  await harness.publish(dest, [...before, ...bad, ...after]);
  const running = await harness.start(dest, {
    consumer,
    handler,
    options,
    listen: (inbox) => {
      inbox.on('message:duplicate', (e) => {
        duplicates.add(e.id);
        note('duplicate', e.id);
      });
      inbox.on('message:failed', (e) => note('failed', e.id, `(${e.reason})`));
      inbox.on('message:conflict', (e) => note('conflict', e.id));
      inbox.on('message:retry', (e) => note('retry', e.id, `(${e.error.message.slice(0, 80)})`));
    },
  });
  const timeouts: string[] = [];
  let dead: DeadLetterDetail[] = [];
  try {
    const processedBad = bad.filter(
      (m) => m.expect.outcome === 'processed' || m.expect.outcome === 'duplicate',
    );
    await soft(timeouts, 'the neighbours and the processed bad messages have their effects', async () => {
      const ids = new Set((await ledger.effects()).map((e) => e.messageId));
      return [...good, ...processedBad.map((m) => m.id as string)].every((id) => ids.has(id));
    });
    const deadLettered = bad.filter((m) => m.expect.outcome === 'failed' || m.expect.outcome === 'conflict');
    // Also read when none is wanted, briefly: a stray dead letter is a failure too.
    dead = await harness.deadLetterDetails(
      dest,
      Math.max(1, deadLettered.length),
      deadLettered.length ? WAIT_MS : 3_000,
    );
    await soft(timeouts, `every message of ${dest.name} settled`, () => harness.settled(dest, consumer));
  } finally {
    await running.stop();
  }

  const effects = await ledger.effects();
  const count = (id: string, body?: Buffer | string) =>
    effects.filter((e) => e.messageId === id && (body === undefined || e.payload === digest(body))).length;
  const rows = await inboxRows(t, consumer);
  console.log(
    `[corpus] ${broker} ${mode} | ${c.name}: ${waited(effects, before, after, publishedAt)} ` +
      `(maxAttempts ${options.maxAttempts}, retries ${options.retryDelayMs} ms apart); events of the bad ones: ` +
      summary(events.filter((e) => !good.some((id) => e.endsWith(JSON.stringify(id.slice(0, 40)))))),
  );

  const labelOf = new Map<string, string>(good.map((id) => [id, id.slice(tag.length + 1)]));
  for (const m of bad) if (typeof m.id === 'string' && !labelOf.has(m.id)) labelOf.set(m.id, m.label);
  const seen = {
    timeouts,
    neighbours: good.map((id) => ({ id: labelOf.get(id), effects: count(id), row: rows.get(id)?.status })),
    bad: bad.map((m) => observe(m, count, rows, dead, options.failedBodyMaxBytes)),
    inbox: [...rows]
      .map(([id, r]) => `${labelOf.get(id) ?? JSON.stringify(id.slice(0, 60))}: ${r.status}`)
      .sort(),
    strayDeadLetters: dead
      .filter((d) => !bad.some((m) => Buffer.from(m.body).equals(d.body)))
      .map((d) => ({ id: d.id, reason: d.reason })),
  };
  const want = {
    timeouts: [],
    neighbours: good.map((id) => ({ id: labelOf.get(id), effects: 1, row: 'done' })),
    bad: bad.map((m) => expected(m)),
    inbox: [
      ...good.map((id) => `${labelOf.get(id)}: done`),
      ...new Set(bad.flatMap((m) => rowWanted(m))),
    ].sort(),
    strayDeadLetters: [],
  };
  expect(seen).toEqual(want);

  // A stored result with a NUL reaches a later duplicate unchanged: ask the inbox as a redelivery would.
  for (const m of bad.filter((b) => b.expect.outcome === 'duplicate')) {
    expect(duplicates).toContain(m.id);
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer,
      storeResult: true,
      ...(mode === 'lease' ? { mode: { lease: { leaseMs: LEASE_MS } } } : {}),
      handler: () => {
        throw new Error('a duplicate must not run');
      },
    });
    const out = await inbox.process({
      id: m.id as string,
      body: Buffer.from(m.body),
      headers: {},
      source: { broker, queue: dest.name },
      attempt: 2,
      redelivered: true,
    });
    expect(out).toMatchObject({ status: 'duplicate', result: NUL_RESULT });
  }
}

/**
 * How long the neighbours waited: from publish to their effects, and how far the first neighbour
 * after the bad messages came behind the last one before them (the hold-up the bad ones caused,
 * consumer start-up excluded). NaN when some never got an effect.
 */
function waited(
  effects: readonly { messageId: string; at: Date }[],
  before: readonly OutMessage[],
  after: readonly OutMessage[],
  publishedAt: number,
): string {
  const at = (m: OutMessage) => effects.find((e) => e.messageId === m.id)?.at.getTime() ?? Number.NaN;
  const all = [...before, ...after].map((m) => at(m) - publishedAt);
  const heldUp = Math.min(...after.map(at)) - Math.max(...before.map(at));
  return `neighbours done ${Math.min(...all)}–${Math.max(...all)} ms after publish, held up ${heldUp} ms by the bad ones`;
}

/** `a, a, b` → `a ×2, b`. */
function summary(events: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const e of events) counts.set(e, (counts.get(e) ?? 0) + 1);
  return [...counts].map(([e, n]) => (n > 1 ? `${e} ×${n}` : e)).join(', ') || 'none';
}

/** What happened to one bad message, in the shape of {@link expected}. */
function observe(
  m: BadMessage,
  count: (id: string, body?: Buffer | string) => number,
  rows: ReadonlyMap<string, Row>,
  dead: readonly DeadLetterDetail[],
  limit: number | undefined,
) {
  const id = typeof m.id === 'string' ? m.id : undefined;
  const row = id === undefined ? undefined : rows.get(id);
  const copies = dead.filter((d) => Buffer.from(m.body).equals(d.body));
  return {
    label: m.label,
    effects: id === undefined ? 0 : count(id, m.body),
    row: row
      ? { status: row.status, bodyTruncated: row.bodyTruncated, body: storedBody(row.body, m.body, limit) }
      : null,
    deadLetter: [...new Set(copies.map((d) => d.reason ?? '(no reason)'))],
    rowError: row?.error === undefined || row.error === null ? null : JSON.stringify(fromJsonb(row.error)),
    deadLetterError: copies[0] ? JSON.stringify(copies[0].error ?? null) : null,
    deadLetterBodyBytes: copies[0]?.body.length ?? null,
  };
}

/** What should have happened to one bad message. */
function expected(m: BadMessage) {
  const e: Expectation = m.expect;
  const anyText = expect.toBeOneOf([null, expect.any(String)]);
  const base = { label: m.label, rowError: anyText, deadLetterError: anyText };
  switch (e.outcome) {
    case 'processed':
    case 'duplicate':
      return {
        ...base,
        effects: 1,
        row: { status: 'done', bodyTruncated: false, body: 'none' },
        deadLetter: [],
        deadLetterBodyBytes: null,
      };
    case 'conflict':
      return {
        ...base,
        effects: 0,
        row: { status: 'done', bodyTruncated: false, body: 'none' },
        deadLetter: ['conflict'],
        deadLetterBodyBytes: Buffer.byteLength(m.body),
      };
    case 'failed': {
      const text = e.error ? allOf(e.error) : expect.any(String);
      return {
        label: m.label,
        effects: 0,
        // A failed row keeps the body for operators to replay: whole, or cut to failedBodyMaxBytes.
        row: e.row
          ? {
              status: 'failed',
              bodyTruncated: e.bodyTruncated ?? false,
              body: e.bodyTruncated ? 'a prefix within the limit' : 'whole',
            }
          : null,
        deadLetter: [expect.stringMatching(new RegExp(`^(${e.reasons.join('|')})$`))],
        rowError: e.row ? text : null,
        deadLetterError: text,
        // The copy keeps the whole body, also when the stored one was cut.
        deadLetterBodyBytes: Buffer.byteLength(m.body),
      };
    }
  }
}

/** The inbox rows a bad message should leave, as `label: status`. */
function rowWanted(m: BadMessage): string[] {
  if (typeof m.id !== 'string') return [];
  const e = m.expect;
  if (e.outcome === 'failed') return e.row ? [`${m.label}: failed`] : [];
  if (e.outcome === 'conflict') return []; // the original's row stays, under the original's label
  if (e.outcome === 'duplicate') return []; // the first copy's row, under the first copy's label
  return [`${m.label}: done`];
}

/** How a row's stored body relates to the body sent. */
function storedBody(stored: Buffer | null, sent: string | Buffer, limit: number | undefined): string {
  if (stored === null) return 'none';
  const original = Buffer.from(sent);
  if (stored.equals(original)) return 'whole';
  const prefix = original.subarray(0, stored.length).equals(stored);
  if (prefix && limit !== undefined && stored.length <= limit) return 'a prefix within the limit';
  return `${stored.length} bytes, ${prefix ? 'a prefix' : 'not a prefix'} of the ${original.length} sent`;
}

/** One matcher for text that matches every pattern. */
function allOf(patterns: readonly RegExp[]) {
  const flags = [...new Set(patterns.flatMap((p) => [...p.flags]))].join('');
  return expect.stringMatching(new RegExp(patterns.map((p) => `(?=[\\s\\S]*${p.source})`).join(''), flags));
}

/** Every inbox row of `consumer`, by message id. */
async function inboxRows(t: BrokerUnderTest, consumer: string): Promise<Map<string, Row>> {
  const { rows } = await t.db.pool.query(
    `SELECT message_id, status, error, body_truncated, body FROM ${quoteIdent(t.db.schema)}.inbox WHERE consumer = $1`,
    [consumer],
  );
  return new Map(
    rows.map(
      (r: {
        message_id: string;
        status: string;
        error: unknown;
        body_truncated: boolean;
        body: Buffer | null;
      }) => [
        r.message_id,
        { status: r.status, error: r.error, bodyTruncated: r.body_truncated, body: r.body },
      ],
    ),
  );
}

/** Waits like waitFor, but records a timeout instead of throwing, so the comparison can say more. */
async function soft(
  timeouts: string[],
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = WAIT_MS,
): Promise<void> {
  try {
    await waitFor(what, check, timeoutMs);
  } catch {
    timeouts.push(what);
  }
}

const childScript = fileURLToPath(new URL('./fixtures/consumer-child.mjs', import.meta.url));

/**
 * A message whose handler calls process.exit(1), consumed by a child process as the crash
 * scenario does; the child is started again whenever it dies, until the destination is settled.
 */
async function runExitCase(t: BrokerUnderTest, broker: BrokerName, mode: Mode): Promise<void> {
  const { harness, db } = t;
  const tag = `exit${mode === 'lease' ? 'l' : ''}-${run}`;
  const key = `${tag}-key`;
  const consumer = 'corpus-exit';
  const maxAttempts = 2;
  const dest = await harness.create(`corpus-${mode === 'lease' ? 'lexit' : 'exit'}-${broker}`);
  const ledger: Ledger = await db.ledger();
  const killer: OutMessage = { id: `${tag}-killer`, key, body: `${tag} exits` };
  const before = neighbours(tag, 'before', key);
  const after = neighbours(tag, 'after', key);
  const good = [...before, ...after].map((m) => m.id as string);
  const publishedAt = Date.now();
  await harness.publish(dest, [...before, killer, ...after]);

  const child = startChild({
    script: childScript,
    env: {
      CONFORMANCE_CHILD: JSON.stringify({
        settings: {
          ...harness.childConfig(dest, consumer),
          maxAttempts,
          // Lease mode counts claims: each death leaves the lease to run out, then a takeover.
          ...(mode === 'lease' ? { mode: { lease: { leaseMs: LEASE_MS } } } : {}),
        },
        consumer,
        schema: db.schema,
        ledgerTable: ledger.table,
        exitOnId: killer.id,
      }),
    },
  });
  // Started again whenever it dies, until the end: a redelivery needs a live consumer.
  let keep = true;
  const keeper = setInterval(() => {
    if (keep && !child.running) child.start();
  }, 100);
  const timeouts: string[] = [];
  let dead: DeadLetterDetail[] = [];
  try {
    await soft(
      timeouts,
      'the neighbours processed, the killer recorded failed, the destination settled',
      async () => {
        const ids = new Set((await ledger.effects()).map((e) => e.messageId));
        const rows = await inboxRows(t, consumer);
        return (
          good.every((id) => ids.has(id)) &&
          rows.get(killer.id as string)?.status === 'failed' &&
          (await harness.settled(dest, consumer))
        );
      },
      90_000,
    );
    dead = await harness.deadLetterDetails(dest, 1, WAIT_MS);
  } finally {
    keep = false;
    clearInterval(keeper);
    await child.kill('SIGTERM');
  }

  const effects = await ledger.effects();
  const starts = child.lines.filter(
    (l) => (l.json as { event?: string } | undefined)?.event === 'exiting',
  ).length;
  console.log(
    `[corpus] ${broker} ${mode} | process.exit: ${child.runs} consumer runs, the killer started ${starts} times; ` +
      waited(effects, before, after, publishedAt),
  );
  const rows = await inboxRows(t, consumer);
  expect({
    timeouts,
    neighbours: good.map((id) => effects.filter((e) => e.messageId === id).length),
    killer: {
      effects: effects.filter((e) => e.messageId === killer.id).length,
      row: rows.get(killer.id as string)?.status ?? null,
      deadLetter: [...new Set(dead.filter((d) => d.id === killer.id).map((d) => d.reason))],
      startsWithinBudget: starts <= maxAttempts + 1,
    },
  }).toEqual({
    timeouts: [],
    neighbours: good.map(() => 1),
    killer: {
      effects: 0,
      row: 'failed',
      // The run that records the killer failed (after its starts ran out) dead-letters it after
      // that commit. If that run dies or loses the partition in between (the children here are
      // restarted and rejoin their group, so rebalances are frequent), the next delivery finds
      // the row failed and dead-letters the message with `previously-failed`: still dead-lettered,
      // with the row failed and no effect, which is what this case is about.
      deadLetter: [expect.stringMatching(/^(max-attempts|permanent|previously-failed)$/)],
      startsWithinBudget: true,
    },
  });
}
