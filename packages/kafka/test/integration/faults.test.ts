import net from 'node:net';
import { type Admin, Kafka, logLevel, type Message } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  kafkaClient,
  type Ledger,
  message,
  produce,
  SCALE,
  serviceUrls,
  type TestDb,
  uniqueName,
  waitFor,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { createKafkaConsumer, type KafkaConsumer } from '../../src/index.js';

// kafkajs only, whatever ONCE_KAFKA_CLIENT says: every Kafka socket of the consumer cut while
// messages are in flight, at the client, through kafkajs' socketFactory (brokers advertise their
// own address, so a TCP proxy would only carry the bootstrap connection). The other clients have
// no socket hook; their cuts go through the fault campaign's network namespaces (chaos/).
// scripts/kafka-clients-check leaves this file out of the other clients' runs. PostgreSQL
// backends terminated mid-batch, which needs no socket hook, is pg-terminated.test.ts.

const N = Math.round(3_000 * SCALE);
let db: TestDb;
let kafka: Kafka;
let admin: Admin;
const stops: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_faults', 4);
  kafka = kafkaClient('once-faults');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const stop of stops) await stop().catch(() => {});
  await admin.disconnect();
  await db.close();
});

async function topicWith(name: string): Promise<{ topic: string; ids: string[] }> {
  const topic = uniqueName(name);
  await createTopicsReady(admin, { [topic]: 3 });
  const ids = Array.from({ length: N }, (_, i) => `${topic}-${i}`);
  const messages: Message[] = ids.map((id, i) => message(id, `k${i % 30}`));
  await produce(kafka, topic, messages);
  return { topic, ids };
}

/** A kafkajs client whose sockets the test can cut. */
function cuttableKafka(clientId: string): { kafka: Kafka; cut: () => number } {
  const sockets = new Set<net.Socket>();
  const client = new Kafka({
    clientId,
    brokers: [...serviceUrls().kafkaBrokers],
    logLevel: logLevel.NOTHING,
    retry: { retries: 8, initialRetryTime: 100 },
    socketFactory: ({ host, port, onConnect }) => {
      const socket = net.connect({ host, port }, onConnect);
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
      return socket;
    },
  });
  return {
    kafka: client,
    cut: () => {
      const n = sockets.size;
      // As a peer's RST looks to the client: an ECONNRESET error, then close. (kafkajs listens
      // for 'error' and 'end' only; a bare local destroy would leave its requests hanging.)
      for (const s of sockets) s.destroy(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
      return n;
    },
  };
}

function onceConsumer(k: Kafka, topic: string, ledger: Ledger, pool = db.pool): KafkaConsumer {
  const c = createKafkaConsumer({
    kafka: k,
    groupId: uniqueName('g-once'),
    topics: [topic],
    pool,
    schema: db.schema,
    fromBeginning: true,
    deadLetterTopic: false,
    batchSize: 50,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    retryDelayMs: () => 100,
    maxAttempts: 100,
    handler: async (envelope, { tx, id }) => {
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: '' });
    },
  });
  stops.push(() => c.stop());
  return c;
}

const countOf = async (ledger: Ledger) =>
  Number((await db.pool.query(`SELECT count(*) AS n FROM ${ledger.table}`)).rows[0].n);

// No naive control here: plain kafkajs keeps fetch positions in memory, so a cut alone does not
// make it repeat effects (measured); the crash and rebalance tests carry the controls.
it('every Kafka connection cut mid-batch, three times: recovers, exactly once', {
  timeout: 150_000,
}, async () => {
  const { topic, ids } = await topicWith('kafka-cut');
  const storm = async (cut: () => number, ledger: Ledger) => {
    let cuts = 0;
    for (let k = 1; k <= 3; k++) {
      await waitFor(`${k * 20}% of the effects`, async () => (await countOf(ledger)) >= N * 0.2 * k, 60_000);
      // Right after the previous cut kafkajs may still be reconnecting, with no socket to cut:
      // keep trying until a live connection is cut, so each of the three cuts really happens.
      await waitFor(`a live Kafka connection to cut (cut ${k})`, () => cut() > 0, 30_000);
      cuts++;
    }
    return cuts;
  };

  const once = cuttableKafka('once-cut');
  const ledger = await db.ledger('cut');
  const consumer = onceConsumer(once.kafka, topic, ledger);
  await consumer.start();
  expect(await storm(once.cut, ledger)).toBe(3);
  await waitForCommitted(admin, consumer.options.groupId, topic);
  const verdict = await ledger.check({ expectedIds: ids, checkOrderPerKey: true });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated).toEqual([]);
  expect(verdict.ok).toBe(true);
  await consumer.stop();
});
