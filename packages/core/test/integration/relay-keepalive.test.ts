import { randomBytes } from 'node:crypto';
import { afterAll, expect, it } from 'vitest';
import { createRelay, migrate } from '../../src/index.js';
import { makePool } from './fixtures/db.js';

// The relay's LISTEN session sits idle: no statement's bound applies to it, so its socket gets
// TCP keepalive (first probe after 10 s idle), whatever the pool's own settings.
const pool = makePool(4);
const schema = `relay_keepalive_${randomBytes(4).toString('hex')}`;
afterAll(async () => {
  await pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => {});
  await pool.end();
});

it("turns keepalive on for the LISTEN connection's socket, on a pool without keepAlive", async () => {
  await migrate(pool, { schema });
  const set: [boolean, number][] = [];
  // Every checkout, the idle connections migrate() left included.
  const patched = new WeakSet<object>();
  pool.on('acquire', (client) => {
    if (patched.has(client)) return;
    patched.add(client);
    const stream = (
      client as unknown as { connection: { stream: { setKeepAlive(on: boolean, ms: number): unknown } } }
    ).connection.stream;
    const original = stream.setKeepAlive.bind(stream);
    stream.setKeepAlive = (on: boolean, ms: number) => {
      set.push([on, ms]);
      return original(on, ms);
    };
  });
  const relay = createRelay({
    pool,
    schema,
    pollIntervalMs: 600_000,
    publishers: { d: { publish: async () => {} } },
  });
  await relay.start();
  try {
    expect(relay.health().listening).toBe(true);
    expect(set).toEqual([[true, 10_000]]);
  } finally {
    await relay.stop();
  }
});
