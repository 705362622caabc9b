import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createOutbox, createRelay, type OutboxPublisher, type Relay } from '../../src/index.js';
import { makePool } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_relay_conc', 3);
});
afterAll(async () => {
  await db.close();
});

/**
 * A publisher of our own interface that checks, while each call waits for its "broker", what the
 * relay promises: every row it was given is still pending (not marked sent before the confirm)
 * and still locked by the round's transaction (another connection's SKIP LOCKED finds none of
 * them); no row is in flight twice; no key has two rows in flight; a key's rows come in order.
 */
function checkingPublisher(destination: string) {
  const violations: string[] = [];
  const published = new Map<string, number>();
  const inFlight = new Set<string>();
  const keysInFlight = new Set<string>();
  /** Per key, the last body (its position) confirmed. */
  const lastConfirmed = new Map<string, number>();
  let calls = 0;
  let maxCalls = 0;
  const publisher: OutboxPublisher = {
    async publish(messages) {
      maxCalls = Math.max(maxCalls, ++calls);
      for (const m of messages) {
        published.set(m.id, (published.get(m.id) ?? 0) + 1);
        if (inFlight.has(m.id)) violations.push(`${m.id} in flight twice`);
        inFlight.add(m.id);
        if (m.key !== undefined) {
          if (keysInFlight.has(m.key)) violations.push(`key ${m.key}: two rows in flight`);
          keysInFlight.add(m.key);
          const n = Number(m.body.toString().split(':')[1]);
          const before = lastConfirmed.get(m.key) ?? -1;
          if (n !== before + 1)
            violations.push(`key ${m.key}: row ${n} published after row ${before} confirmed`);
        }
      }
      const ids = messages.map((m) => m.id);
      const status = await db.pool.query<{ status: string }>(
        `SELECT status FROM ${db.schema}.outbox WHERE id::text = ANY($1) AND destination = $2`,
        [ids, destination],
      );
      if (status.rows.length !== ids.length) violations.push('a published row is missing');
      for (const r of status.rows)
        if (r.status !== 'pending') violations.push(`a row ${r.status} before its confirm`);
      const free = await db.pool.query(
        `SELECT id FROM ${db.schema}.outbox WHERE id::text = ANY($1) FOR UPDATE SKIP LOCKED`,
        [ids],
      );
      if (free.rows.length > 0) violations.push(`${free.rows.length} rows not locked while published`);
      await new Promise((r) => setTimeout(r, Math.random() * 4));
      for (const m of messages) {
        inFlight.delete(m.id);
        if (m.key !== undefined) {
          keysInFlight.delete(m.key);
          lastConfirmed.set(m.key, Number(m.body.toString().split(':')[1]));
        }
      }
      calls--;
    },
  };
  return {
    publisher,
    violations,
    get duplicates() {
      let n = 0;
      for (const c of published.values()) n += c - 1;
      return n;
    },
    /** The most publish calls waiting at one moment. */
    get maxCalls() {
      return maxCalls;
    },
    get distinct() {
      return published.size;
    },
  };
}

const KEYS = 12;
const PER_KEY = 25;
const UNKEYED = 150;

async function fill(destination: string) {
  await db.pool.query(`DELETE FROM ${db.schema}.outbox`);
  const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: [destination] });
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    for (let n = 0; n < PER_KEY; n++)
      for (let k = 0; k < KEYS; k++)
        await outbox.enqueue(client, destination, `k${k}:${n}`, { key: `k${k}` });
    for (let i = 0; i < UNKEYED; i++) await outbox.enqueue(client, destination, `free:${i}`);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

/** Runs `relays` until every row is sent; `deleted`: relays that keep no sent row (sentRetentionMs 0). */
async function drain(relays: Relay[], deleted = false) {
  const total = KEYS * PER_KEY + UNKEYED;
  for (const r of relays) await r.start();
  const until = Date.now() + 60_000;
  const sent = async () =>
    deleted
      ? total - Number((await db.pool.query(`SELECT count(*) AS n FROM ${db.schema}.outbox`)).rows[0].n)
      : Number(
          (await db.pool.query(`SELECT count(*) AS n FROM ${db.schema}.outbox WHERE status = 'sent'`)).rows[0]
            .n,
        );
  while ((await sent()) < total && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  await Promise.all(relays.map((r) => r.stop()));
  return sent();
}

describe('overlapping rounds (concurrency)', () => {
  it('one relay with 4 rounds at once: each row published once, locked and pending until confirmed, keys in order', {
    timeout: 90_000,
  }, async () => {
    await fill('c1');
    const check = checkingPublisher('c1');
    const pool = makePool(5);
    const relay = createRelay({
      pool,
      schema: db.schema,
      publishers: { c1: check.publisher },
      batchSize: 20,
      concurrency: 4,
      listen: false,
      pollIntervalMs: 20,
    });
    try {
      expect(await drain([relay])).toBe(KEYS * PER_KEY + UNKEYED);
    } finally {
      await pool.end();
    }
    expect(check.violations).toEqual([]);
    expect(check.duplicates).toBe(0);
    expect(check.distinct).toBe(KEYS * PER_KEY + UNKEYED);
    // The rounds did overlap: more than one publish call was waiting at some moment.
    expect(check.maxCalls).toBeGreaterThan(1);
  });

  /** Three relays on pools of their own drain `destination`; the publisher checks every invariant. */
  async function threeRelays(destination: string, sentRetentionMs?: number) {
    await fill(destination);
    const check = checkingPublisher(destination);
    const pools = [0, 1, 2].map(() => makePool(3));
    const relays = pools.map((pool) =>
      createRelay({
        pool,
        schema: db.schema,
        publishers: { [destination]: check.publisher },
        batchSize: 15,
        concurrency: 2,
        listen: false,
        pollIntervalMs: 20,
        sentRetentionMs,
      }),
    );
    try {
      expect(await drain(relays, sentRetentionMs === 0)).toBe(KEYS * PER_KEY + UNKEYED);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    expect(check.violations).toEqual([]);
    expect(check.duplicates).toBe(0);
    expect(check.distinct).toBe(KEYS * PER_KEY + UNKEYED);
  }

  it(
    'three relays (own pools, as separate processes would be) with 2 rounds each keep the same invariants',
    {
      timeout: 90_000,
    },
    () => threeRelays('c3'),
  );

  it(
    'three relays that keep no sent row (sentRetentionMs 0, a row deleted when confirmed) keep the same invariants',
    {
      timeout: 90_000,
    },
    () => threeRelays('c4', 0),
  );

  it('three relay processes with 2 rounds each: no row in flight twice, one row per key in flight, keys in order', {
    timeout: 120_000,
  }, async () => {
    await fill('p3');
    await db.pool.query(
      `CREATE TABLE IF NOT EXISTS ${db.schema}.relay_log (seq bigserial PRIMARY KEY, pid int, id text, key text, body text, ev text, detail text)`,
    );
    await db.pool.query(`TRUNCATE ${db.schema}.relay_log`);
    const child = fileURLToPath(new URL('./fixtures/relay-child.mjs', import.meta.url));
    const exits = [0, 1, 2].map(
      () =>
        new Promise<string>((resolve, reject) => {
          const p = spawn(process.execPath, [child, db.schema, 'p3'], {
            stdio: ['ignore', 'pipe', 'inherit'],
          });
          let out = '';
          p.stdout.on('data', (d) => {
            out += d;
          });
          p.on('error', reject);
          p.on('exit', (code) =>
            code === 0 ? resolve(out) : reject(new Error(`relay process exited ${code}`)),
          );
        }),
    );
    expect(await Promise.all(exits)).toEqual(['done\n', 'done\n', 'done\n']);
    const events = (
      await db.pool.query<{
        pid: number;
        id: string;
        key: string | null;
        body: string;
        ev: string;
        detail: string;
      }>(`SELECT pid, id, key, body, ev, detail FROM ${db.schema}.relay_log ORDER BY seq`)
    ).rows;
    const violations = events.filter((e) => e.ev === 'violation').map((e) => e.detail);
    const inFlight = new Set<string>();
    const keysInFlight = new Set<string>();
    const lastConfirmed = new Map<string, number>();
    const starts = new Map<string, number>();
    for (const e of events) {
      if (e.ev === 'start') {
        starts.set(e.id, (starts.get(e.id) ?? 0) + 1);
        if (inFlight.has(e.id)) violations.push(`${e.id} in flight twice`);
        inFlight.add(e.id);
        if (e.key !== null) {
          if (keysInFlight.has(e.key)) violations.push(`key ${e.key}: two rows in flight`);
          keysInFlight.add(e.key);
          const n = Number(e.body.split(':')[1]);
          if (n !== (lastConfirmed.get(e.key) ?? -1) + 1)
            violations.push(`key ${e.key}: row ${n} out of order`);
        }
      } else if (e.ev === 'confirm') {
        inFlight.delete(e.id);
        if (e.key !== null) {
          keysInFlight.delete(e.key);
          lastConfirmed.set(e.key, Number(e.body.split(':')[1]));
        }
      }
    }
    expect(violations).toEqual([]);
    expect(starts.size).toBe(KEYS * PER_KEY + UNKEYED);
    expect([...starts.values()].every((n) => n === 1)).toBe(true);
    // Every process did some of the work.
    expect(new Set(events.map((e) => e.pid)).size).toBe(3);
    const sent = await db.pool.query(
      `SELECT count(*)::int AS n FROM ${db.schema}.outbox WHERE status = 'sent'`,
    );
    expect(sent.rows[0].n).toBe(KEYS * PER_KEY + UNKEYED);
  });

  it('rejects a concurrency below 1, naming it', () => {
    expect(() =>
      createRelay({
        pool: db.pool,
        schema: db.schema,
        publishers: { a: { publish: async () => {} } },
        concurrency: 0,
      }),
    ).toThrow(/option 'concurrency'/);
  });
});
