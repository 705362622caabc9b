import { createInbox, createOutbox, createRelay, migrate, PermanentError } from '@once/core';
import { grantRuntime, purge, runtimeGrants } from '@once/core/admin';
import { createRabbitConsumer, createRabbitPublisher } from '@once/rabbitmq';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cli } from '../../packages/cli/test/integration/fixtures/cli.js';
import {
  createTestPool,
  dropSchema,
  freshSchemaName,
  serviceEnv,
  serviceUrls,
  uniqueName,
  waitFor,
} from '../support/index.js';
import { amqpAdmin } from './fixtures/outbox-env.js';

// Two roles, as docs/operations.md ("Least-privilege roles") sets them up: an owner that creates
// the schema and runs migrate(), and a runtime role with only runtimeGrants(). As the runtime
// role: a RabbitMQ consumer whose handler writes and publishes through the outbox, a relay, the
// purge, and the CLI's commands all work; DROP, ALTER, CREATE, TRUNCATE and writing the schema
// version are refused.

const roleName = (prefix: string) => uniqueName(prefix).replace(/-/g, '_');
const ownerRole = roleName('once_owner');
const runtimeRole = roleName('once_runtime');
const schema = freshSchemaName('least_priv');
const exchange = uniqueName('least-priv');
const queue = `${exchange}-in`;
const rawQueue = `${exchange}-raw`;
const consumerName = 'billing';

let su: pg.Pool;
let owner: pg.Pool;
let runtime: pg.Pool;
let rabbit: Awaited<ReturnType<typeof amqpAdmin>>;

function urlAs(role: string): string {
  const url = new URL(serviceEnv('DATABASE_URL'));
  url.username = role;
  url.password = '';
  return url.toString();
}

function poolAs(role: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: urlAs(role), max: 5 });
  pool.on('error', () => {});
  return pool;
}

beforeAll(async () => {
  su = createTestPool();
  const db = new URL(serviceEnv('DATABASE_URL')).pathname.slice(1);
  await su.query(`CREATE ROLE ${ownerRole} LOGIN`);
  await su.query(`CREATE ROLE ${runtimeRole} LOGIN`);
  // The owner may create schemas in the database (or an administrator runs
  // CREATE SCHEMA ... AUTHORIZATION for it); the runtime role gets nothing at the database level.
  await su.query(`GRANT CREATE ON DATABASE "${db}" TO ${ownerRole}`);
  owner = poolAs(ownerRole);
  runtime = poolAs(runtimeRole);
  rabbit = await amqpAdmin();
  const ch = await rabbit.conn.createChannel();
  await ch.assertExchange(exchange, 'fanout', { durable: false });
  await ch.assertQueue(rawQueue, { durable: false });
  await ch.bindQueue(rawQueue, exchange, '');
  await ch.close();
});

afterAll(async () => {
  await owner?.end();
  await runtime?.end();
  const tiers = [1000, 10000, 60000].map((t) => `${queue}.retry.${t}ms`);
  await rabbit?.deleteQueues([queue, rawQueue, `${queue}.dead`, ...tiers]);
  await rabbit?.deleteExchanges([exchange, `${queue}.dlx`]);
  await rabbit?.close();
  const db = new URL(serviceEnv('DATABASE_URL')).pathname.slice(1);
  await dropSchema(su, schema).catch(() => {});
  for (const role of [runtimeRole, ownerRole]) {
    // Privileges and default privileges go with DROP OWNED; then the role can be dropped.
    await su.query(`DROP OWNED BY ${role}`).catch(() => {});
    await su.query(`REVOKE ALL ON DATABASE "${db}" FROM ${role}`).catch(() => {});
    await su.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
  }
  await su.end();
});

it('the owner migrates and grants; the runtime role runs a consumer, an outbox relay, purge and the CLI', async () => {
  const migrated = await migrate(owner, { schema });
  expect(migrated.from).toBe(0);
  await grantRuntime(owner, schema, runtimeRole);
  // The application's table, created by the owner after the grants, as a later migration of
  // once's would be: the default privileges give the runtime role the same access.
  await owner.query(`CREATE TABLE ${schema}.charges (id text PRIMARY KEY, cents integer NOT NULL)`);

  // A process of the runtime role may call migrate() at start-up: the schema is current, so it
  // changes nothing and needs no privilege beyond reading the version.
  expect(await migrate(runtime, { schema })).toMatchObject({ schema, from: migrated.to, to: migrated.to });

  const url = serviceUrls().amqpUrl;
  const outbox = createOutbox({ pool: runtime, schema, destinations: [exchange] });
  const consumer = createRabbitConsumer({
    url,
    queue,
    pool: runtime,
    schema,
    consumer: consumerName,
    outbox,
    retentionMs: 1000,
    logger: false,
    handler: async (envelope, ctx) => {
      const body = JSON.parse(envelope.body.toString()) as { cents: number };
      if (body.cents < 0) throw new PermanentError('negative amount');
      await ctx.tx.query(`INSERT INTO ${schema}.charges (id, cents) VALUES ($1, $2)`, [ctx.id, body.cents]);
      await ctx.publish(exchange, { charged: ctx.id }, { key: ctx.id });
    },
  });
  const publisher = createRabbitPublisher({ url });
  const relay = createRelay({
    pool: runtime,
    schema,
    publishers: { [exchange]: publisher },
    pollIntervalMs: 200,
  });
  try {
    await consumer.start();
    await relay.start();
    expect(relay.health()).toMatchObject({ listening: true });
    const send = await rabbit.conn.createConfirmChannel();
    for (let i = 0; i < 10; i++) {
      send.sendToQueue(queue, Buffer.from(JSON.stringify({ cents: i * 100 })), { messageId: `m-${i}` });
    }
    send.sendToQueue(queue, Buffer.from(JSON.stringify({ cents: 100 })), { messageId: 'm-3' }); // a re-send
    send.sendToQueue(queue, Buffer.from(JSON.stringify({ cents: -1 })), { messageId: 'poison' });
    await send.waitForConfirms();
    await send.close();

    await waitFor('10 published effects', async () => (await rabbit.count(rawQueue)) >= 10, 60_000);
    await waitFor(
      'the poison message dead-lettered',
      async () => (await rabbit.count(`${queue}.dead`)) >= 1,
      60_000,
    );
    const charges = await su.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.charges`);
    expect(charges.rows[0]!.n).toBe(10);
    expect(relay.health().lastError).toBeUndefined();

    // The CLI as the runtime role.
    const env = { DATABASE_URL: urlAs(runtimeRole) };
    const status = await cli(['status', '--json', '--schema', schema], { env });
    expect(status.code, status.stderr).toBe(0);
    const failed = await cli(['failed', 'list', '--json', '--schema', schema], { env });
    expect(failed.code, failed.stderr).toBe(0);
    expect(failed.stdout).toContain('poison');
    const inspect = await cli(['inspect', consumerName, 'm-3', '--schema', schema], { env });
    expect(inspect.code, inspect.stderr).toBe(0);
    const outboxStatus = await cli(['outbox', 'status', '--schema', schema], { env });
    expect(outboxStatus.code, outboxStatus.stderr).toBe(0);
  } finally {
    await consumer.stop();
    await relay.stop();
    await publisher.stop();
  }

  // The Kafka replay marker of a client without commit metadata (schema version 11): an upsert
  // and a read of the runtime role.
  const marker = createInbox({ pool: runtime, schema, consumer: consumerName, handler: async () => {} });
  await marker.noteInflight('orders', 0, '5');
  await marker.noteInflight('orders', 0, '6');
  expect(await marker.inflightEnd('orders', 0)).toBe('6');

  // Retention: the done rows expire after a second; the purge as the runtime role deletes them.
  await new Promise((r) => setTimeout(r, 1_200));
  expect(await purge(runtime, { schema })).toBeGreaterThanOrEqual(10);
});

it('the runtime role cannot change the schema: DROP, ALTER, CREATE, TRUNCATE and version rows are refused', async () => {
  const refused = async (sql: string) => {
    const err = await runtime.query(sql).then(
      () => undefined,
      (e: { code?: string }) => e,
    );
    expect(err?.code, `${sql} must be refused`).toBe('42501'); // insufficient_privilege
  };
  await refused(`DROP TABLE ${schema}.inbox`);
  await refused(`ALTER TABLE ${schema}.inbox ADD COLUMN x integer`);
  await refused(`ALTER TABLE ${schema}.outbox DROP COLUMN body`);
  await refused(`CREATE TABLE ${schema}.intruder (x integer)`);
  await refused(`TRUNCATE ${schema}.inbox`);
  await refused(`DROP SCHEMA ${schema} CASCADE`);
  await refused(`INSERT INTO ${schema}.schema_version (version, name) VALUES (999, 'x')`);
  await refused(`DELETE FROM ${schema}.schema_version`);
  // Installing a schema needs CREATE on the database, which the runtime role does not have.
  const other = freshSchemaName('least_priv_other');
  await expect(migrate(runtime, { schema: other })).rejects.toMatchObject({ code: '42501' });

  // Every table of the schema: read and write, nothing else; schema_version read-only.
  const { rows } = await su.query<{ table: string; privs: string }>(
    `SELECT c.relname AS table,
            concat_ws(',', ${['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']
              .map((p) => `CASE WHEN has_table_privilege($1, c.oid, '${p}') THEN '${p}' END`)
              .join(', ')}) AS privs
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $2 AND c.relkind = 'r' ORDER BY 1`,
    [runtimeRole, schema],
  );
  expect(rows.length).toBeGreaterThanOrEqual(6);
  for (const { table, privs } of rows) {
    expect(privs, table).toBe(table === 'schema_version' ? 'SELECT' : 'SELECT,INSERT,UPDATE,DELETE');
  }
  expect(runtimeGrants(schema, runtimeRole).join(';\n')).not.toMatch(/TRUNCATE|CREATE ON|ALL PRIVILEGES/);
});
