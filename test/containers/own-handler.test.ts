import { createInbox, migrate } from '@once/core';
import { checkEffectsOnce, makeEnvelope } from '@once/core/testing';
import pg from 'pg';
import { GenericContainer, type StartedTestContainer, Wait } from 'testcontainers';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { HARNESS_LABEL, serviceImages } from '../support/containers.js';

// docs/core.md, "In a container of its own": a user's handler checked with @once/core/testing
// against a PostgreSQL container of the test's own, started and removed by the test. The same
// code as the sample; the image is the local one, and the container joins the harness' network
// so its port, too, is published on loopback only. getHost() is 127.0.0.1 because the harness sets
// TESTCONTAINERS_HOST_OVERRIDE (loopback.test.ts holds it).
let container: StartedTestContainer | undefined;
let db: pg.Pool | undefined;

beforeAll(async () => {
  container = await new GenericContainer(serviceImages().postgres)
    .withNetworkMode(inject('serviceNetwork'))
    .withLabels({ [HARNESS_LABEL]: String(process.pid) })
    .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
    .withExposedPorts(5432)
    .withWaitStrategy(Wait.forSuccessfulCommand('pg_isready -h 127.0.0.1 -U postgres'))
    .start();
  const port = container.getMappedPort(5432);
  db = new pg.Pool({ connectionString: `postgres://postgres@${container.getHost()}:${port}/postgres` });
  await migrate(db);
  await db.query('CREATE TABLE charges (order_id text PRIMARY KEY, amount int NOT NULL)');
}, 120_000);

afterAll(async () => {
  await db?.end();
  await container?.stop({ timeout: 1_000 });
});

describe('a handler tested in a container of its own', () => {
  it('charges once per order', async () => {
    const pool = db as pg.Pool;
    const inbox = createInbox({
      pool,
      consumer: 'billing.orders',
      handler: async (message, { tx, id }) => {
        const { amount } = JSON.parse(message.body.toString());
        await tx.query('INSERT INTO charges (order_id, amount) VALUES ($1, $2)', [id, amount]);
      },
    });
    const report = await checkEffectsOnce(inbox, makeEnvelope({ id: 'order-1', body: { amount: 5 } }), {
      countEffects: async (id) =>
        (await pool.query('SELECT count(*) FROM charges WHERE order_id = $1', [id])).rows[0].count,
    });
    expect(report.violations).toEqual([]);
    expect(report.scenarios.length).toBeGreaterThan(0);
  });

  it('is caught writing outside the transaction', async () => {
    const pool = db as pg.Pool;
    await pool.query('CREATE TABLE leaks (order_id text NOT NULL)');
    const inbox = createInbox({
      pool,
      consumer: 'billing.leaky',
      // pool.query, not tx.query: the write survives the failure after the handler.
      handler: async (_message, { id }) => {
        await pool.query('INSERT INTO leaks (order_id) VALUES ($1)', [id]);
      },
    });
    const report = await checkEffectsOnce(inbox, makeEnvelope({ id: 'order-2', body: {} }), {
      countEffects: async (id) =>
        (await pool.query('SELECT count(*) FROM leaks WHERE order_id = $1', [id])).rows[0].count,
    });
    expect(report.violations.join('\n')).toMatch(/failure-then-redelivery/);
  });
});
