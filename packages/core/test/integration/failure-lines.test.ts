import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { ConsumerLifecycle } from '../../src/adapter/lifecycle.js';
import { resolveInboxOptions } from '../../src/engine/options.js';
import { createInbox, type Handler, Inbox, type InboxOptions, PermanentError } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

// Issue #15: with no logger, the four failures a user must see are printed, one console.warn
// line each with id, reason and destination; everything else stays silent; `false` silences.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_failure_lines', 8);
});
afterAll(async () => {
  await db.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

const ok: Handler = async () => {};
const inboxOf = (consumer: string, patch: Partial<InboxOptions> = {}) =>
  createInbox({ pool: db.pool, schema: db.schema, consumer, handler: ok, retryDelayMs: () => 0, ...patch });
const capture = () => vi.spyOn(console, 'warn').mockImplementation(() => {});
const lines = (spy: ReturnType<typeof capture>) => spy.mock.calls.map((c) => c.join(' '));

describe('failure lines by default', () => {
  it('a conflict is one warn line with id, reason and destination', async () => {
    const ib = inboxOf('fl-conflict');
    await ib.process(envelope('c-1'));
    const spy = capture();
    const o = await ib.process(envelope('c-1', { body: Buffer.from('other') }));
    expect(o.status).toBe('conflict');
    expect(lines(spy)).toEqual([expect.stringMatching(/id=c-1 reason=conflict destination=not recorded/)]);
  });

  it('an invalid id is one warn line', async () => {
    const ib = inboxOf('fl-invalid');
    const spy = capture();
    const o = await ib.process(envelope(undefined));
    expect(o).toMatchObject({ status: 'failed', reason: 'invalid-id' });
    expect(lines(spy)).toEqual([
      expect.stringMatching(/reason=invalid-id destination=not recorded \(no id\)/),
    ]);
  });

  it('each failed run is one warn line saying what happens next; exhausted attempts one more (issue #29 item 1)', async () => {
    // Until issue #29 the retries before the last attempt printed nothing: a failing handler was
    // invisible until its message was dead-lettered.
    const ib = inboxOf('fl-exhausted', {
      maxAttempts: 2,
      retryDelayMs: () => 250,
      handler: async () => {
        throw new Error('flaky');
      },
    });
    const spy = capture();
    const e = envelope('x-1');
    expect((await ib.process(e)).status).toBe('retry');
    expect(lines(spy)).toEqual([
      expect.stringMatching(
        /^once: handler failed consumer=\S+ id=x-1 attempt=1 of 2 error=flaky next=retry in 250 ms$/,
      ),
    ]);
    const o = await ib.process({ ...e, attempt: 2, redelivered: true });
    expect(o).toMatchObject({ status: 'failed', reason: 'max-attempts' });
    expect(lines(spy).slice(1)).toEqual([
      expect.stringMatching(/id=x-1 reason=max-attempts destination=recorded only error=flaky/),
    ]);
  });

  it('a permanent failure of a bare inbox is one line with its error and that it is recorded, not retried', async () => {
    const ib = inboxOf('fl-permanent', {
      handler: async () => {
        throw new PermanentError('bad body');
      },
    });
    const spy = capture();
    expect(await ib.process(envelope('p-1'))).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(lines(spy)).toEqual([
      expect.stringMatching(
        /^once: handler failed .*id=p-1 attempt=1 of \d+ error=bad body code=PERMANENT next=recorded failed, not retried/,
      ),
    ]);
  });

  it('the same error of the same message repeats at most once a minute', async () => {
    const ib = inboxOf('fl-repeat', {
      maxAttempts: 50,
      handler: async () => {
        throw new Error('always');
      },
    });
    const spy = capture();
    for (let attempt = 1; attempt <= 5; attempt++)
      await ib.process({ ...envelope('r-1'), attempt, redelivered: attempt > 1 });
    expect(lines(spy)).toHaveLength(1);
  });

  it('a database outage is one line per episode, not one per message, and one when it ends', async () => {
    const down = new pg.Pool({
      connectionString: 'postgres://once@127.0.0.1:1/none',
      connectionTimeoutMillis: 500,
    });
    try {
      const ib = createInbox({ pool: down, consumer: 'fl-outage', handler: async () => {} });
      const spy = capture();
      for (let i = 0; i < 5; i++) expect((await ib.process(envelope(`d-${i}`))).status).toBe('not-run');
      const got = lines(spy).filter((l) => /database unavailable/.test(l));
      expect(got).toHaveLength(1);
      expect(got[0]).toMatch(/^once: database unavailable; .* consumer=fl-outage error=.*ECONNREFUSED/);
    } finally {
      await down.end();
    }
  });

  it('a processed message and a duplicate print nothing', async () => {
    const ib = inboxOf('fl-quiet');
    const spy = capture();
    await ib.process(envelope('q-1'));
    await ib.process(envelope('q-1'));
    expect(spy).not.toHaveBeenCalled();
  });

  it('logger: false prints nothing, not even the failure lines', async () => {
    const ib = inboxOf('fl-off', { logger: false });
    const spy = capture();
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    await ib.process(envelope('o-1'));
    await ib.process(envelope('o-1', { body: Buffer.from('other') }));
    await ib.process(envelope(undefined));
    expect(spy).not.toHaveBeenCalled();
    expect(err).not.toHaveBeenCalled();
  });

  it('a given logger receives the fields object first, and console stays quiet', async () => {
    const got: [unknown, unknown][] = [];
    const rec = (fields: object, msg?: string) => void got.push([fields, msg]);
    const ib = inboxOf('fl-pino', { logger: { debug: rec, info: rec, warn: rec, error: rec } });
    const spy = capture();
    await ib.process(envelope(undefined));
    expect(spy).not.toHaveBeenCalled();
    expect(got).toEqual([[expect.objectContaining({ reason: 'invalid-id' }), expect.any(String)]]);
  });
});

describe('who owns the failure lines', () => {
  it('an inbox made with failureLines: adapter leaves them to its consumer: the engine logs none', async () => {
    const options = resolveInboxOptions({
      pool: db.pool,
      schema: db.schema,
      consumer: 'fl-adapter',
      handler: ok,
      retryDelayMs: () => 0,
    });
    const ib = new Inbox(options, { failureLines: 'adapter' });
    expect(ib.failureLines).toBe('adapter');
    expect(inboxOf('fl-engine').failureLines).toBe('engine');
    const spy = capture();
    await ib.process(envelope('a-1'));
    const o = await ib.process(envelope('a-1', { body: Buffer.from('other') }));
    expect(o.status).toBe('conflict');
    expect((await ib.process(envelope(undefined))).status).toBe('failed');
    expect(spy).not.toHaveBeenCalled();
  });

  it('the consumer logs its dead letters once, with their destination, when its inbox leaves them to it', async () => {
    const got: [Record<string, unknown>, unknown][] = [];
    const rec = (fields: object, msg?: string) => void got.push([fields as Record<string, unknown>, msg]);
    const logger = { debug: rec, info: rec, warn: rec, error: rec };
    const options = resolveInboxOptions({
      pool: db.pool,
      schema: db.schema,
      consumer: 'fl-consumer',
      handler: ok,
      logger,
    });
    const engine = new Inbox(options);
    const adapter = new Inbox(options, { failureLines: 'adapter' });
    for (const ib of [engine, adapter]) {
      const life = new ConsumerLifecycle({ name: 'once/test', inbox: ib, logger, stopTimeoutMs: 100 });
      life.events.emit('message:dead-lettered', {
        id: 'd-1',
        reason: 'permanent',
        source: { broker: 't', queue: 'q', partition: 3, offset: '41' },
        deadLetter: 'q.dlq',
        recorded: true,
        error: { name: 'Error', message: 'column "amout" does not exist', code: '42703' },
        attempts: 2,
      });
    }
    // Only the consumer whose inbox left the lines to it logs the dead letter.
    expect(got).toEqual([
      [
        {
          consumer: 'fl-consumer',
          id: 'd-1',
          reason: 'permanent',
          destination: 'q.dlq',
          recorded: true,
          // The dead-letter line carries the error and the attempt (issue #29 item 1), and where
          // the delivery was.
          attempt: '2 of 5',
          error: 'column "amout" does not exist',
          code: '42703',
          queue: 'q',
          partition: 3,
          offset: '41',
          group: undefined,
          delivery: undefined,
        },
        'once/test: message dead-lettered',
      ],
    ]);
  });
});
