import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createRelay, type PgPoolLike, type RelayOptions } from '../../src/index.js';
import { RoundGate } from '../../src/outbox/round-gate.js';

// createRelay({ databases }): the option errors, and the shared round budget that decides which
// database's round goes next (relay-databases.test.ts in integration runs it on real databases).

const pool = {
  connect: async () => ({}) as never,
  query: async () => ({ rows: [], rowCount: 0 }),
} as PgPoolLike;
const publishers = { d: { publish: async () => undefined } };

describe('createRelay over several databases: option errors name the field', () => {
  it.each([
    ['both', { pool, databases: { a: pool } }, /^createRelay: option 'pool' and 'databases' are both given/],
    ['neither', {}, /^createRelay: option 'pool' or 'databases' must be given/],
    ['an empty set', { databases: {} }, /option 'databases' must name at least one database/],
    ['a bad name', { databases: { 'a b': pool } }, /option 'databases.a b' is not a database name/],
    [
      'a long name',
      { databases: { ['x'.repeat(64)]: pool } },
      /option 'databases.x+' is not a database name/,
    ],
    [
      'not a pool',
      { databases: { a: 'postgres://x' } },
      /option 'databases.a' must be a pg Pool, got string/,
    ],
    ['an array', { databases: [pool] }, /option 'databases' must be an object of name → pool, got an array/],
    ['maxListeners with pool', { pool, maxListeners: 2 }, /option 'maxListeners' goes with 'databases'/],
    [
      'maxListeners below 0',
      { databases: { a: pool }, maxListeners: -1 },
      /option 'maxListeners' must be at least 0/,
    ],
    [
      'maxListeners not whole',
      { databases: { a: pool }, maxListeners: 1.5 },
      /option 'maxListeners' must be an integer/,
    ],
    ['concurrency', { databases: { a: pool }, concurrency: 0 }, /option 'concurrency' must be at least 1/],
    ['publishers', { databases: { a: pool }, publishers: {} }, /option 'publishers' must map at least one/],
  ])('%s', (_case, patch, message) => {
    expect(() => createRelay({ publishers, ...patch } as unknown as RelayOptions)).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringMatching(message) }),
    );
  });

  it('accepts names as migrateDatabases does, and reports each database before start', () => {
    const relay = createRelay({
      databases: { 'tenant-a': pool, 'shard.2': pool, t_3: pool },
      publishers,
      maxListeners: 2,
    });
    const h = relay.health();
    expect(h.running).toBe(false);
    expect(h.databases?.map((d) => [d.name, d.pastListenerCap, d.pollingOnly])).toEqual([
      ['tenant-a', false, false],
      ['shard.2', false, false],
      ['t_3', true, true],
    ]);
    // One database alone keeps today's health: no per-database list.
    expect(createRelay({ pool, publishers }).health().databases).toBeUndefined();
  });
});

describe('RoundGate', () => {
  it('admits up to its limit, then gives each freed place to the next database in turn', async () => {
    const gate = new RoundGate(2, ['a', 'b', 'c']);
    const a1 = await gate.enter('a');
    const a2 = await gate.enter('a');
    const order: string[] = [];
    const a3 = gate.enter('a').then((leave) => (order.push('a'), leave));
    const b1 = gate.enter('b').then((leave) => (order.push('b'), leave));
    const c1 = gate.enter('c').then((leave) => (order.push('c'), leave));
    expect(gate.inUse).toBe(2);
    expect(['a', 'b', 'c'].map((n) => gate.queued(n))).toEqual([1, 1, 1]);
    a1!();
    a1!(); // leaving twice frees one place
    await b1;
    expect(order).toEqual(['b']);
    a2!();
    await c1;
    // a waited first, but a already had its turn: b and c went before its third round.
    expect(order).toEqual(['b', 'c']);
    (await b1)!();
    await a3;
    expect(order).toEqual(['b', 'c', 'a']);
    expect(gate.inUse).toBe(2);
  });

  it('a stop while waiting ends the wait with nothing and frees no place', async () => {
    const gate = new RoundGate(1, ['a', 'b']);
    const a = await gate.enter('a');
    const stop = new AbortController();
    const waiting = gate.enter('b', stop.signal);
    stop.abort();
    expect(await waiting).toBeUndefined();
    expect(gate.queued('b')).toBe(0);
    expect(gate.inUse).toBe(1);
    a!();
    expect(gate.inUse).toBe(0);
    expect(await gate.enter('b', AbortSignal.abort())).toBeUndefined();
  });

  it('property: never over the limit, no free place while a round waits, and no database admitted twice while another waits', async () => {
    const names = ['a', 'b', 'c', 'd'];
    const op = fc.oneof(fc.record({ enter: fc.constantFrom(...names) }), fc.record({ leave: fc.nat(20) }));
    return fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.array(op, { maxLength: 60 }),
        async (limit, ops) => {
          const gate = new RoundGate(limit, names);
          let inside = 0;
          const leaves: (() => void)[] = [];
          // Per database that waits: how often each other database was admitted since it began to.
          const since = new Map<string, Map<string, number>>();
          for (const o of ops) {
            const before = names.map((n) => gate.queued(n));
            const entering = 'enter' in o ? o.enter : undefined;
            if ('enter' in o) {
              void gate.enter(o.enter).then((leave) => leaves.push(leave!));
            } else if (leaves.length > 0) {
              leaves.splice(o.leave % leaves.length, 1)[0]!();
              inside--;
            }
            // enter() admits synchronously where it may: what was queued before, plus the one that
            // came in, minus what is queued now, was admitted by this step.
            for (const [i, name] of names.entries()) {
              const admitted = before[i]! + (name === entering ? 1 : 0) - gate.queued(name);
              expect(admitted).toBeGreaterThanOrEqual(0);
              inside += admitted;
              // Its turn came: what others got before it no longer counts.
              if (admitted > 0) since.get(name)?.clear();
              for (const [waiter, counts] of since) {
                if (waiter === name || admitted === 0) continue;
                const n = (counts.get(name) ?? 0) + admitted;
                counts.set(name, n);
                expect(n, `${name} admitted twice while ${waiter} waited`).toBeLessThanOrEqual(1);
              }
            }
            for (const name of names) {
              if (gate.queued(name) === 0) since.delete(name);
              else if (!since.has(name)) since.set(name, new Map());
            }
            expect(gate.inUse).toBe(inside);
            expect(gate.inUse).toBeLessThanOrEqual(limit);
            if (names.some((n) => gate.queued(n) > 0)) expect(gate.inUse).toBe(limit);
            // The admitted rounds' leave functions arrive a tick later.
            await new Promise((r) => setImmediate(r));
            expect(leaves.length).toBe(inside);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
