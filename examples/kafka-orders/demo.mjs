// @ts-check
// The `npm run demo` side of this example (see scripts/demo.mjs): a topic, a group and a schema of
// its own, orders with application-level re-sends, and the ledger check of src/check.mjs.
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { checkOrders } from './src/check.mjs';
import { createTopics, deleteTopics, kafkaClient } from './src/kafka.mjs';
import { createTables } from './src/orders.mjs';
import { publishOrders } from './src/producer.mjs';

/** @type {import('../../scripts/demo/example-contract.js').DemoExample} */
export default {
  name: 'kafka-orders',
  broker: 'kafka',
  async prepare({ databaseUrl, run, count, dupShare }) {
    const schema = `demo_kafka_orders_${run}`;
    const topic = `demo-orders-${run}`;
    const groupId = `demo-orders-${run}`;
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    pool.on('error', () => {});
    const kafka = kafkaClient();
    await createTables(pool, schema);
    await createTopics(kafka, topic);
    const { sent, unique, orders } = await publishOrders({ kafka, topic, count, dupShare, run });
    const admin = kafka.admin();
    await admin.connect();

    return {
      sent,
      unique,
      consumers: [
        {
          script: fileURLToPath(new URL('./src/consumer.mjs', import.meta.url)),
          args: [],
          env: {
            DATABASE_URL: databaseUrl,
            ORDERS_SCHEMA: schema,
            ORDERS_TOPIC: topic,
            ORDERS_GROUP: groupId,
          },
        },
      ],
      async effects() {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS total, count(DISTINCT order_id)::int AS unique FROM ${schema}.orders`,
        );
        return rows[0];
      },
      // The group's lag: records not yet covered by a committed offset. once commits an offset
      // only after the transaction of everything before it committed.
      async pending() {
        const ends = await admin.fetchTopicOffsets(topic);
        const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
        let lag = 0;
        for (const p of ends) {
          const c = committed?.partitions.find((x) => x.partition === p.partition);
          lag += Number(p.offset) - Math.max(Number(p.low), Number(c?.offset ?? -1));
        }
        return lag;
      },
      verify: () => checkOrders(pool, schema, orders),
      async cleanup() {
        await admin.disconnect().catch(() => {});
        await deleteTopics(kafka, topic);
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
        await pool.end();
      },
    };
  },
};
