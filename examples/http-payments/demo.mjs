// @ts-check
// This example's part of `npm run demo` (see scripts/demo/example-contract.d.ts). The "messages"
// are HTTP requests: a client in the demo's own process (ChargeClient, fetch over 127.0.0.1) sends
// one POST /charges per unique charge to two payments-service processes, about `dupShare` of them
// twice at once with one key, loses some responses on purpose, and retries everything with the
// same key until it has a final answer. The runner SIGKILLs both servers (mid-request: the client
// keeps sending) and the receipts consumer part-way, then starts them again; the client retries
// through it. Effects: the `charges` rows; the stages show them and the receipts written
// downstream from Kafka. Pending: charges without a final answer, unsent outbox rows, Kafka lag.

import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { quoteIdentifier } from '@once/core/admin';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { ChargeClient, idOf, planCharges } from './src/client.mjs';
import { createTopics, kafkaLag } from './src/kafka.mjs';
import { namesFor } from './src/names.mjs';
import { PAYMENTS_CONSUMER } from './src/payments-service.mjs';
import { RECEIPTS_CONSUMER } from './src/receipts-service.mjs';
import { schemaFor, setupSchema } from './src/schema.mjs';

/** A free loopback port (closed again; the server process binds it a moment later). */
async function freePort() {
  const srv = createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = srv.address();
  await new Promise((resolve) => srv.close(() => resolve(undefined)));
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** @type {import('../../scripts/demo/example-contract.js').DemoExample} */
export default {
  name: 'http-payments',
  broker: 'http',
  async prepare({ databaseUrl, run, count, dupShare }) {
    const brokers = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
    const schema = schemaFor('example_http', run);
    const s = quoteIdentifier(schema, 'schema');
    const names = namesFor(run);
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    pool.on('error', () => {});
    await setupSchema(pool, schema);
    const kafka = new Kafka({ brokers: brokers.split(','), logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    await createTopics(admin, names.topic);

    const ports = [await freePort(), await freePort()];
    const plan = planCharges({ run, count, dupShare });
    const unique = new Set(plan.map(idOf)).size;
    const client = new ChargeClient({ urls: ports.map((p) => `http://127.0.0.1:${p}`) });
    // Sends as soon as a server answers (the runner starts them when prepare returns).
    let clientError = /** @type {string | undefined} */ (undefined);
    const sending = client.run(plan).catch((err) => {
      clientError = err instanceof Error ? err.message : String(err);
    });

    const script = fileURLToPath(new URL('./src/service.mjs', import.meta.url));
    const env = {
      DATABASE_URL: databaseUrl,
      KAFKA_BROKERS: brokers,
      PAYMENTS_SCHEMA: schema,
      PAYMENTS_RUN: run,
    };
    /**
     * @param {string} sql
     * @param {unknown[]} [values]
     */
    const one = async (sql, values) => (await pool.query(sql, values)).rows[0];
    return {
      get sent() {
        return client.stats.requests;
      },
      unique,
      consumers: [
        { script, args: ['http'], env: { ...env, PORT: String(ports[0]) } },
        { script, args: ['http'], env: { ...env, PORT: String(ports[1]) } },
        { script, args: ['receipts'], env },
      ],
      effects: async () =>
        one(
          `SELECT count(*)::int AS total, count(DISTINCT (account, idempotency_key))::int AS unique FROM ${s}.charges`,
        ),
      stages: async () => [
        {
          name: 'charges',
          ...(await one(
            `SELECT count(*)::int AS total, count(DISTINCT (account, idempotency_key))::int AS unique FROM ${s}.charges`,
          )),
        },
        {
          name: 'receipts',
          ...(await one(
            `SELECT count(*)::int AS total, count(DISTINCT (account, idempotency_key))::int AS unique FROM ${s}.receipts`,
          )),
        },
      ],
      pending: async () =>
        unique -
        client.finals.size +
        (await one(`SELECT count(*)::int AS n FROM ${s}.outbox WHERE status = 'pending'`)).n +
        (await kafkaLag(admin, names.topic, names.groupId)),
      verify: async () => {
        await sending;
        const r = await one(
          `SELECT (SELECT count(*)::int FROM ${s}.charges) AS charges,
                  (SELECT count(*)::int FROM ${s}.receipts) AS receipts,
                  (SELECT count(*)::int FROM ${s}.receipts r WHERE NOT EXISTS (
                     SELECT 1 FROM ${s}.charges c WHERE c.charge_id = r.charge_id AND c.account = r.account
                       AND c.idempotency_key = r.idempotency_key AND c.amount_cents = r.amount_cents
                       AND c.event_id = r.event_id)) AS unmatched,
                  (SELECT count(*)::int FROM ${s}.outbox WHERE status = 'sent') AS sent,
                  (SELECT count(*)::int FROM ${s}.outbox WHERE status <> 'sent') AS unsent,
                  (SELECT count(*)::int FROM ${s}.inbox WHERE consumer = $1 AND status = 'done') AS keys,
                  (SELECT count(*)::int FROM ${s}.inbox WHERE consumer = $2 AND status <> 'done') AS not_done`,
          [PAYMENTS_CONSUMER, RECEIPTS_CONSUMER],
        );
        // Every client got the charge that was written for its key: same id, account and amount.
        const { rows } = await pool.query(
          `SELECT charge_id, account, idempotency_key, amount_cents FROM ${s}.charges`,
        );
        const byId = new Map(rows.map((c) => [idOf({ account: c.account, key: c.idempotency_key }), c]));
        let wrong = 0;
        for (const c of plan) {
          const answer = client.finals.get(idOf(c));
          const row = byId.get(idOf(c));
          const got = answer ? JSON.parse(answer.body) : undefined;
          if (!row || got?.id !== row.charge_id || got.amountCents !== Number(row.amount_cents)) wrong++;
        }
        const st = client.stats;
        const ok =
          !clientError &&
          client.problems.length === 0 &&
          client.finals.size === unique &&
          wrong === 0 &&
          r.charges === unique &&
          r.receipts === unique &&
          r.unmatched === 0 &&
          r.sent === unique &&
          r.unsent === 0 &&
          r.keys === unique &&
          r.not_done === 0 &&
          st.mismatch422 === st.mismatches;
        const problems = clientError ? [clientError] : client.problems.slice(0, 3);
        return {
          ok,
          detail:
            `${r.charges} charges and ${r.receipts} receipts for ${unique} unique (account, key) pairs; ` +
            `${client.finals.size} clients got their 201, ${wrong} with another charge than the one written; ` +
            `${st.requests} requests: ${st.replayed} replays, ${st.lost} responses lost on purpose, ` +
            `${st.cut} cut by the SIGKILL, ${st.refused} refused while the servers were down, ${st.busy} 409s, ` +
            `${st.serverErrors} 5xx, ${st.mismatch422} of ${st.mismatches} re-used keys with another amount ` +
            `refused with 422; outbox: ${r.sent} events sent, ${r.unsent} unsent; ${r.unmatched} receipts ` +
            `without their charge; ${r.not_done} events not done` +
            (problems.length ? `; ${problems.join('; ')}` : ''),
        };
      },
      cleanup: async () => {
        client.stop();
        await sending;
        const topics = await admin.listTopics();
        await admin.deleteTopics({
          topics: [names.topic, `${names.topic}.dlq`].filter((t) => topics.includes(t)),
        });
        await admin.disconnect();
        await pool.query(`DROP SCHEMA ${s} CASCADE`);
        await pool.end();
      },
    };
  },
};
