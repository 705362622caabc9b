import { describe, expect, it } from 'vitest';
import {
  ConsumerLifecycle,
  type LifecycleHooks,
  StartCounter,
  settlePlanOf,
} from '../../src/adapter/index.js';
import type { Envelope } from '../../src/envelope.js';
import { ErrorCode, OnceError } from '../../src/errors.js';
import type { HandlerContext } from '../../src/handler.js';
import type { Inbox } from '../../src/inbox.js';
import { silentLogger } from '../../src/logger.js';
import { LATEST_SCHEMA_VERSION } from '../../src/migrations.js';

/** What the settle plans need of an inbox's options. */
const plans = { consumer: 'c', recordFailed: true };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An inbox double: `down` makes ready() and the schema check fail, like an unreachable database. */
function fakeInbox() {
  const listeners = new Set<(e: { why: string; error: { name: string; message: string } }) => void>();
  const state = { down: false, readyCalls: 0, starts: new Map<string, number>() };
  const pool = {
    query: async () => {
      if (state.down)
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
      return { rows: [{ version: LATEST_SCHEMA_VERSION }], rowCount: 1 };
    },
  };
  const inbox = {
    consumer: 'c',
    options: { pool, schema: 'once' },
    on: (_: string, l: (e: { why: string; error: { name: string; message: string } }) => void) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    ready: async () => {
      state.readyCalls++;
      await pool.query();
    },
    noteStart: async (e: Envelope) => {
      const n = (state.starts.get(e.id!) ?? 0) + 1;
      state.starts.set(e.id!, n);
      return n;
    },
    /** What core's inbox does when a message meets an unusable database. */
    unavailable: () => {
      for (const l of listeners) l({ why: 'unavailable', error: { name: 'Error', message: 'down' } });
    },
  };
  return { inbox, state };
}

function hooks(log: string[], overrides: Partial<LifecycleHooks> = {}): LifecycleHooks {
  return {
    open: async () => void log.push('open'),
    pause: () => void log.push('pause'),
    resume: () => void log.push('resume'),
    drain: async () => void log.push('drain'),
    close: async () => void log.push('close'),
    ...overrides,
  };
}

function lifecycle(inbox: unknown, stopTimeoutMs = 1_000) {
  return new ConsumerLifecycle({
    name: 'once/test',
    inbox: inbox as Inbox,
    logger: silentLogger,
    stopTimeoutMs,
  });
}

describe('ConsumerLifecycle', () => {
  it('starts once, stops once, and reports its states', async () => {
    const { inbox } = fakeInbox();
    const log: string[] = [];
    const l = lifecycle(inbox);
    const states: string[] = [];
    l.events.on('consumer:state', (e) => states.push(e.state));
    l.attach(hooks(log));
    const first = l.start();
    expect(l.start()).toBe(first);
    await first;
    expect(l.state).toBe('running');
    expect(l.health(true)).toMatchObject({ state: 'running', healthy: true, available: true });
    await expect(l.start()).rejects.toMatchObject({ code: ErrorCode.Closed });
    await Promise.all([l.stop(), l.stop()]);
    expect(log).toEqual(['open', 'drain', 'close']);
    expect(states).toEqual(['starting', 'running', 'stopping', 'stopped']);
    await expect(l.start()).rejects.toMatchObject({ code: ErrorCode.Closed });
  });

  it('fails start() when the broker side cannot open, and closes what it opened', async () => {
    const { inbox } = fakeInbox();
    const log: string[] = [];
    const l = lifecycle(inbox);
    l.attach(hooks(log, { open: async () => Promise.reject(new OnceError('X_UNREACHABLE', 'no broker')) }));
    await expect(l.start()).rejects.toMatchObject({ code: 'X_UNREACHABLE' });
    expect(l.state).toBe('failed');
    expect(log).toEqual(['close']);
    await l.stop();
    expect(l.state).toBe('stopped');
  });

  it('starts while the database is down, holds the broker, and fetches once the schema checks out', async () => {
    const { inbox, state } = fakeInbox();
    state.down = true;
    const log: string[] = [];
    const l = lifecycle(inbox);
    let fetchingAtOpen: boolean | undefined;
    l.attach(
      hooks(log, {
        open: async () => {
          fetchingAtOpen = l.fetching;
        },
      }),
    );
    const resumed = new Promise((r) => l.events.on('consumer:resumed', r));
    await l.start();
    expect(fetchingAtOpen).toBe(false);
    expect(l.health(true)).toMatchObject({ state: 'running', healthy: false, available: false });
    expect(l.health(true).lastError?.where).toBe('database');
    await sleep(700);
    expect(log).toEqual([]);
    state.down = false;
    await resumed;
    expect(log).toEqual(['resume']);
    expect(l.health(true)).toMatchObject({ healthy: true, available: true });
    await l.stop();
  });

  it('pauses when the inbox says the database is unusable, and resumes after a schema check passes', async () => {
    const { inbox, state } = fakeInbox();
    const log: string[] = [];
    const l = lifecycle(inbox);
    l.attach(hooks(log, { open: async () => void log.push(`open fetching=${l.fetching}`) }));
    await l.start();
    state.down = true;
    const paused = new Promise((r) => l.events.on('consumer:paused', r));
    inbox.unavailable();
    inbox.unavailable();
    await paused;
    expect(log).toEqual(['open fetching=true', 'pause']);
    expect(l.fetching).toBe(false);
    const resumed = new Promise((r) => l.events.on('consumer:resumed', r));
    await sleep(400);
    state.down = false;
    await resumed;
    expect(log).toEqual(['open fetching=true', 'pause', 'resume']);
    expect(l.fetching).toBe(true);
    await l.stop();
  });

  it('does not hang start() on a database that never answers', async () => {
    const { inbox } = fakeInbox();
    const silent = { ...inbox, ready: () => new Promise<void>(() => {}) };
    const log: string[] = [];
    const l = new ConsumerLifecycle({
      name: 'once/test',
      inbox: silent as unknown as Inbox,
      logger: silentLogger,
      stopTimeoutMs: 1_000,
      readyWaitMs: 50,
    });
    l.attach(hooks(log));
    await l.start();
    expect(l.health(true)).toMatchObject({ state: 'running', healthy: false, available: false });
    expect(l.health(true).lastError?.message).toContain('no answer from PostgreSQL within 50 ms');
    await l.stop();
  });

  it('closes at the stop deadline when in-flight work does not drain, and says so', async () => {
    const { inbox } = fakeInbox();
    const log: string[] = [];
    const l = lifecycle(inbox, 100);
    const errors: string[] = [];
    l.events.on('error', (e) => errors.push(e.where));
    l.attach(hooks(log, { drain: () => new Promise(() => {}) }));
    await l.start();
    const started = performance.now();
    await l.stop();
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(log).toEqual(['open', 'close']);
    expect(errors).toEqual(['stop']);
    expect(l.state).toBe('stopped');
  });
});

describe('StartCounter', () => {
  it('counts starts of marked envelopes only, and refuses one past maxAttempts', async () => {
    const { inbox, state } = fakeInbox();
    const killed: number[] = [];
    const counter = new StartCounter({
      inbox: () => ({ ...inbox, options: { maxAttempts: 2, logger: silentLogger } }) as unknown as Inbox,
      waitMs: 1_000,
      onExhausted: (_, starts) => killed.push(starts),
    });
    let ran = 0;
    const handler = counter.wrap(() => ++ran);
    const ctx = {} as HandlerContext;
    const env = (id: string) => ({ id }) as Envelope;
    await handler(env('fresh'), ctx);
    expect(state.starts.has('fresh')).toBe(false);
    for (let i = 0; i < 2; i++) {
      const e = env('killer');
      counter.mark(e);
      await handler(e, ctx);
    }
    const last = env('killer');
    counter.mark(last);
    await expect(handler(last, ctx)).rejects.toMatchObject({ code: ErrorCode.AttemptsExhausted, starts: 3 });
    expect(ran).toBe(3);
    expect(killed).toEqual([3]);
  });

  it('hands a fresh delivery straight to the handler: its own return value, no count', async () => {
    const { inbox, state } = fakeInbox();
    const counter = new StartCounter({
      inbox: () => ({ ...inbox, options: { maxAttempts: 2, logger: silentLogger } }) as unknown as Inbox,
      waitMs: 1_000,
    });
    const result = Promise.resolve('r');
    const e = { id: 'fresh' } as Envelope;
    const ctx = {} as HandlerContext;
    expect(counter.wrap(() => result)(e, ctx)).toBe(result);
    expect(counter.wrap(() => 7)(e, ctx)).toBe(7);
    // A synchronous throw stays one: core's runner calls the handler inside try/catch.
    const boom = new Error('boom');
    expect(() =>
      counter.wrap(() => {
        throw boom;
      })(e, ctx),
    ).toThrow(boom);
    expect(state.starts.size).toBe(0);
    // A marked one is counted first, and its handler's throw becomes a rejection.
    counter.mark(e);
    await expect(
      counter.wrap(() => {
        throw boom;
      })(e, ctx),
    ).rejects.toBe(boom);
    expect(state.starts.get('fresh')).toBe(1);
  });

  it('with attemptIsStarts: the count is the attempt, once per delivery, and follows how runs end', async () => {
    const { inbox, state } = fakeInbox();
    const forgotten: string[] = [];
    const counter = new StartCounter({
      inbox: () =>
        ({
          ...inbox,
          forgetStart: async (e: Envelope) => {
            forgotten.push(e.id!);
            state.starts.set(e.id!, (state.starts.get(e.id!) ?? 1) - 1);
          },
          options: { maxAttempts: 5, logger: silentLogger },
        }) as unknown as Inbox,
      waitMs: 1_000,
      attemptIsStarts: true,
    });
    const handler = counter.wrap(() => 'ran');
    const ctx = {} as HandlerContext;
    // A redelivery whose receive count (7) says nothing of its runs: its attempt becomes its starts.
    const e = { id: 'm', attempt: 7 } as Envelope;
    counter.mark(e);
    await handler(e, ctx);
    await handler(e, ctx); // core running the same delivery again counts nothing more
    expect(e.attempt).toBe(1);
    expect(state.starts.get('m')).toBe(1);
    const retry = (envelope: Envelope, spent: boolean) =>
      ({
        status: 'retry',
        id: envelope.id,
        envelope,
        error: { name: 'E', message: 'x' },
        delayMs: 0,
        spent,
      }) as const;
    // Its run failed on the environment (not spent): the start is taken back.
    await counter.settled(e, settlePlanOf(retry(e, false), plans));
    expect(forgotten).toEqual(['m']);
    expect(state.starts.get('m')).toBe(0);
    // A fresh delivery, not counted before it ran, whose retry is spent: counted now.
    const fresh = { id: 'f', attempt: 1 } as Envelope;
    await handler(fresh, ctx);
    await counter.settled(fresh, settlePlanOf(retry(fresh, true), plans));
    expect(state.starts.get('f')).toBe(1);
  });

  it('without attemptIsStarts, settled() changes nothing', async () => {
    const { inbox, state } = fakeInbox();
    const counter = new StartCounter({
      inbox: () => ({ ...inbox, options: { maxAttempts: 5, logger: silentLogger } }) as unknown as Inbox,
      waitMs: 1_000,
    });
    const e = { id: 'k', attempt: 3 } as Envelope;
    counter.mark(e);
    await counter.wrap(() => 'ran')(e, {} as HandlerContext);
    expect(e.attempt).toBe(3);
    await counter.settled(
      e,
      settlePlanOf(
        {
          status: 'retry',
          id: 'k',
          envelope: e,
          error: { name: 'E', message: 'x' },
          delayMs: 0,
          spent: true,
        },
        plans,
      ),
    );
    expect(state.starts.get('k')).toBe(1);
  });

  it('runs uncounted when the count cannot be had in time', async () => {
    const counter = new StartCounter({
      inbox: () =>
        ({
          noteStart: () => new Promise(() => {}),
          options: { maxAttempts: 1, logger: silentLogger },
        }) as unknown as Inbox,
      waitMs: 20,
    });
    const e = { id: 'x' } as Envelope;
    counter.mark(e);
    expect(await counter.wrap(() => 'ran')(e, {} as HandlerContext)).toBe('ran');
  });
});
