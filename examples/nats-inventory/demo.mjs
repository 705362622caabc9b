// @ts-check
// The `npm run demo` side of this example (see scripts/demo.mjs): a stream and a schema of its
// own, reservations re-sent past JetStream's duplicate window, and the check that every item's
// reserved quantity is exactly the sum of its unique reservations.
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { createTables } from './src/inventory.mjs';
import { publishReservations } from './src/producer.mjs';

const DUPLICATE_WINDOW_MS = 1_000;

/** @type {import('../../scripts/demo/example-contract.js').DemoExample} */
export default {
  name: 'nats-inventory',
  broker: 'nats',
  async prepare({ databaseUrl, run, count, dupShare }) {
    const servers = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
    const schema = `demo_nats_inventory_${run}`;
    const stream = `demo_inventory_${run}`;
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    pool.on('error', () => {});
    await createTables(pool, schema);
    const nc = await connect({ servers });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({
      name: stream,
      subjects: [`${stream}.in.>`, `${stream}.dead`],
      duplicate_window: DUPLICATE_WINDOW_MS * 1e6,
    });
    const { sent, unique, reservations } = await publishReservations({
      servers,
      subjectPrefix: `${stream}.in`,
      count,
      dupShare,
      run,
      duplicateWindowMs: DUPLICATE_WINDOW_MS,
    });
    /** @type {Map<string, number>} */
    const expected = new Map();
    for (const r of reservations) expected.set(r.item, (expected.get(r.item) ?? 0) + r.qty);
    const durable = 'demo_inventory';

    return {
      sent,
      unique,
      consumers: [
        {
          script: fileURLToPath(new URL('./src/consumer.mjs', import.meta.url)),
          args: [],
          env: {
            DATABASE_URL: databaseUrl,
            NATS_URL: servers,
            INVENTORY_SCHEMA: schema,
            INVENTORY_SUBJECT: `${stream}.in.>`,
            INVENTORY_DEAD_SUBJECT: `${stream}.dead`,
            INVENTORY_CONSUMER: durable,
          },
        },
      ],
      async effects() {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS total, count(DISTINCT reservation_id)::int AS unique FROM ${schema}.reservations`,
        );
        return rows[0];
      },
      async pending() {
        const i = await jsm.consumers.info(stream, durable).catch(() => undefined);
        return i ? i.num_pending + i.num_ack_pending : sent;
      },
      async verify() {
        const { rows } = await pool.query(`SELECT item, qty::float8 AS qty FROM ${schema}.reserved`);
        /** @type {Map<string, number>} */
        const reserved = new Map(rows.map((r) => [r.item, Number(r.qty)]));
        const wrong = [...expected].filter(([item, qty]) => reserved.get(item) !== qty);
        const extra = [...reserved.keys()].filter((i) => !expected.has(i));
        const total = [...expected.values()].reduce((s, q) => s + q, 0);
        return wrong.length === 0 && extra.length === 0
          ? {
              ok: true,
              detail: `${expected.size} items, each reserved = sum of its unique reservations; ${total} units reserved once`,
            }
          : {
              ok: false,
              detail: `${wrong.length} item(s) off (e.g. ${wrong[0]?.[0]}: ${reserved.get(wrong[0]?.[0] ?? '')} vs ${wrong[0]?.[1]}), ${extra.length} unexpected item(s)`,
            };
      },
      async cleanup() {
        await jsm.streams.delete(stream).catch(() => {});
        await nc.close().catch(() => {});
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
        await pool.end();
      },
    };
  },
};
