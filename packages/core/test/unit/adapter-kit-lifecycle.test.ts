import { describe, expect, it } from 'vitest';
import { ConsumerLifecycle, type LifecycleHooks } from '../../src/adapter/lifecycle.js';
import { ErrorCode, OnceError } from '../../src/errors.js';
import type { Inbox } from '../../src/inbox.js';
import { silentLogger } from '../../src/logger.js';
import type { Envelope } from '../../src/message/envelope.js';
import { LATEST_SCHEMA_VERSION } from '../../src/schema/migrations.js';

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
    databases: [] as string[],
    unavailableDatabases: [] as string[],
    options: { pool, schema: 'once' },
    on: (_: string, l: (e: { why: string; error: { name: string; message: string } }) => void) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    ready: async () => {
      state.readyCalls++;
      await pool.query();
    },
    checkNow: async () => {
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

  it("holds for a statement of once's own that the database refused (holdIfUnavailable), as for an unavailable outcome; other errors are the caller's", async () => {
    const { inbox, state } = fakeInbox();
    const log: string[] = [];
    const l = lifecycle(inbox);
    l.attach(hooks(log));
    await l.start();
    const pg = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });
    // Not the database being unusable: a rival's lock (55P03), refused data (23505), anything
    // that is no database error. The consumer goes on fetching.
    for (const err of [pg('55P03'), pg('23505'), new Error('not a database fault'), 'text'])
      expect(l.holdIfUnavailable(err)).toBe(false);
    expect(l.fetching).toBe(true);
    expect(log).toEqual(['open']);

    state.down = true;
    const paused = new Promise<{ error: { message: string } }>((r) => l.events.on('consumer:paused', r));
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    expect(l.holdIfUnavailable(refused)).toBe(true);
    // At once, before the broker is told: the caller reads `fetching` right after.
    expect(l.fetching).toBe(false);
    expect((await paused).error.message).toContain('ECONNREFUSED');
    expect(log).toEqual(['open', 'pause']);
    expect(l.health(true)).toMatchObject({ healthy: false, available: false });
    expect(l.health(true).lastError?.where).toBe('database');
    // Held already: more of the same (a missing table, a statement timeout) is held, told once.
    expect(l.holdIfUnavailable(pg('42P01'))).toBe(true);
    expect(l.holdIfUnavailable(pg('57014'))).toBe(true);
    const resumed = new Promise((r) => l.events.on('consumer:resumed', r));
    state.down = false;
    await resumed;
    expect(log).toEqual(['open', 'pause', 'resume']);
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
