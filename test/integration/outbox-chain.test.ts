import { fileURLToPath } from 'node:url';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Admin, Kafka, Message } from 'kafkajs';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type Child,
  createTopicsReady,
  kafkaClient,
  killAllChildren,
  produce,
  startChild,
  uniqueName,
} from '../support/index.js';
import {
  amqpAdmin,
  committedToEnd,
  createTestPool,
  dropServiceDbs,
  SCALE,
  type ServiceDb,
  serviceDb,
  sleep,
  sqsClient,
  sqsQueues,
  waitFor,
} from './fixtures/outbox-env.js';

// Kafka → once handler → outbox → relay → RabbitMQ → once handler → outbox → relay → SQS FIFO →
// once handler. Each stage (consumer + its relay) is a child process SIGKILLed at random moments
// and restarted; 20 % of the first hop's messages are sent twice with the same id. Every stage's
// effect must happen exactly once per message and no outbox row may be left pending. The control
// publishes straight to the broker after its commit instead of through the outbox, is killed
// between the two, and loses messages.

const script = fileURLToPath(new URL('./fixtures/outbox-stage.mjs', import.meta.url));
const N = Math.round(Number(process.env.ONCE_OUTBOX_CHAIN_MESSAGES ?? 5_000) * SCALE);
const DUPLICATE_RATE = 0.2;
const KILLS_PER_STAGE = 3;
const KEYS = 40;

let pool: pg.Pool;
let kafka: Kafka;
let admin: Admin;
let sqs: SQSClient;
let queues: ReturnType<typeof sqsQueues>;
let rabbit: Awaited<ReturnType<typeof amqpAdmin>>;
const dbs: ServiceDb[] = [];
const rabbitQueues: string[] = [];
const rabbitExchanges: string[] = [];

beforeAll(async () => {
  pool = createTestPool({ max: 4 });
  kafka = kafkaClient('outbox-chain');
  admin = kafka.admin();
  await admin.connect();
  sqs = sqsClient();
  queues = sqsQueues(sqs);
  rabbit = await amqpAdmin();
});
afterAll(async () => {
  await killAllChildren();
  await admin.disconnect();
  await queues.drop();
  sqs.destroy();
  const tiers = [1000, 10000, 60000].map((t) => `.retry.${t}ms`);
  await rabbit.deleteQueues(
    rabbitQueues.flatMap((q) => [q, `${q}.dead`, `${q}.quarantine`, ...tiers.map((t) => q + t)]),
  );
  await rabbit.deleteExchanges(rabbitExchanges);
  await rabbit.close();
  await dropServiceDbs(pool, dbs);
  await pool.end();
});

/** A topic holding `count` messages plus a DUPLICATE_RATE share re-sent later with the same id and body. */
async function firstHop(prefix: string, count: number): Promise<{ topic: string; ids: string[] }> {
  const topic = uniqueName(prefix);
  await createTopicsReady(admin, { [topic]: 3 });
  const ids = Array.from({ length: count }, (_, i) => `${topic}-${i}`);
  const message = (id: string, i: number): Message => {
    const key = `k${i % KEYS}`;
    return { key, value: JSON.stringify({ id, key }), headers: { 'message-id': id } };
  };
  const first = ids.map(message);
  const again = ids.flatMap((id, i) => (Math.random() < DUPLICATE_RATE ? [message(id, i)] : []));
  await produce(kafka, topic, [...first, ...again]);
  return { topic, ids };
}

const started = (child: Child) => {
  const run = child.runs - 1;
  return child.waitForLine(
    (l) => l.run === run && (l.json as { event?: string })?.event === 'started',
    60_000,
  );
};

it(`chain of three brokers with every stage SIGKILLed ${KILLS_PER_STAGE} times: ${N} messages, each effect exactly once`, {
  timeout: 300_000,
}, async () => {
  const [s1, s2, s3] = [
    await serviceDb(pool, 'outbox_chain_s1'),
    await serviceDb(pool, 'outbox_chain_s2'),
    await serviceDb(pool, 'outbox_chain_s3'),
  ] as const;
  dbs.push(s1, s2, s3);
  const { topic, ids } = await firstHop('outbox-chain', N);
  const queue = uniqueName('outbox-chain');
  const exchange = `${queue}-x`;
  rabbitQueues.push(queue);
  rabbitExchanges.push(exchange, `${queue}.dlx`);
  const name = uniqueName('outbox-chain');
  const sqsUrl = await queues.create(`${name}.fifo`);
  const dlqUrl = await queues.create(`${name}-dlq.fifo`);
  const groupId = uniqueName('outbox-chain-g');
  const common = { EXCHANGE: exchange, QUEUE: queue, SQS_URL: sqsUrl };

  const stage2 = startChild({ script, env: { ...common, STAGE: 'rabbit', SCHEMA: s2.schema } });
  await started(stage2); // declares the queue and binds the exchange stage 1 publishes to
  const stage3 = startChild({
    script,
    env: { ...common, STAGE: 'sqs', SCHEMA: s3.schema, SQS_DLQ_URL: dlqUrl },
  });
  const stage1 = startChild({
    script,
    env: { ...common, STAGE: 'kafka', SCHEMA: s1.schema, TOPIC: topic, GROUP: groupId },
  });
  const stages = [stage1, stage2, stage3];
  const ledgers = [s1, s2, s3];

  // Kills in a random order across stages, each at a random moment of a run that has started.
  const order = stages.flatMap((c) => Array.from({ length: KILLS_PER_STAGE }, () => c));
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const midWork: boolean[] = [];
  for (const child of order) {
    await started(child);
    const { afterMs } = await child.killAfterRandom(200, 2_500);
    const at = stages.indexOf(child);
    const progress = await Promise.all(ledgers.map((l) => l.distinctEffects()));
    // Mid-work: its consumer had messages left, or its relay had rows to publish.
    midWork.push(progress[at]! < N || (at < 2 && (await ledgers[at]!.outboxCounts()).pending > 0));
    console.log(
      `[outbox-chain] killed stage ${at + 1} after ${afterMs} ms; effects so far ${progress.join('/')} of ${N}`,
    );
    child.start();
  }

  await waitFor(
    'the whole chain to drain',
    async () => {
      const [done, o1, o2, depth, ready] = await Promise.all([
        s3.distinctEffects(),
        s1.outboxCounts(),
        s2.outboxCounts(),
        queues.depth(sqsUrl),
        rabbit.count(queue),
      ]);
      return done === N && o1.pending === 0 && o2.pending === 0 && depth === 0 && ready === 0;
    },
    180_000,
  );
  await waitFor('stage 1 to commit its offsets', () => committedToEnd(admin, groupId, topic), 60_000);

  for (const [i, db] of ledgers.entries()) {
    const verdict = await db.ledger.check({ expectedIds: ids });
    expect({ stage: i + 1, lost: verdict.lost, duplicated: verdict.duplicated }).toEqual({
      stage: i + 1,
      lost: [],
      duplicated: [],
    });
    expect(verdict.ok).toBe(true);
    expect(await db.failedInbox()).toBe(0);
  }
  // One outbox row per first-hop message (the injected duplicates wrote none), all sent.
  expect(await s1.outboxCounts()).toEqual({ pending: 0, sent: N, failed: 0 });
  expect(await s2.outboxCounts()).toEqual({ pending: 0, sent: N, failed: 0 });
  expect(await queues.depth(dlqUrl)).toBe(0);
  expect(stages.map((c) => c.runs)).toEqual([KILLS_PER_STAGE + 1, KILLS_PER_STAGE + 1, KILLS_PER_STAGE + 1]);
  console.log(
    `[outbox-chain] ${N} messages; ${midWork.filter(Boolean).length}/${midWork.length} kills landed mid-work`,
  );
});

it('control: publishing straight to the broker after commit, killed between the two, loses messages', {
  timeout: 180_000,
}, async () => {
  const db = await serviceDb(pool, 'outbox_chain_naive');
  dbs.push(db);
  const count = Math.round(600 * SCALE);
  const { topic, ids } = await firstHop('outbox-naive', count);
  const queue = uniqueName('outbox-naive');
  rabbitQueues.push(queue);
  await rabbit.conn.createChannel().then(async (ch) => {
    await ch.assertQueue(queue, { durable: true });
    await ch.close();
  });
  const groupId = uniqueName('outbox-naive-g');
  const child = startChild({
    script,
    env: { STAGE: 'naive', SCHEMA: db.schema, TOPIC: topic, GROUP: groupId, QUEUE: queue },
  });
  // Kill the moment a run reports its first commit: its publishes are still under way. On a
  // loaded machine a run may have processed every message before the kill lands; a restarted run
  // then has only duplicates and never reports a commit, so stop killing once all are in.
  for (let k = 0; k < 3; k++) {
    if (k > 0 && (await db.distinctEffects()) === count) break;
    const run = child.runs - 1;
    await child.waitForLine(
      (l) => l.run === run && (l.json as { event?: string })?.event === 'committed',
      60_000,
    );
    await child.kill();
    child.start();
  }
  await waitFor(
    'the naive stage to process everything',
    async () => (await db.distinctEffects()) === count,
    120_000,
  );
  await waitFor('its offsets', () => committedToEnd(admin, groupId, topic), 60_000);
  await sleep(1_000); // publishes of the last batch
  const delivered = new Set(
    (await rabbit.drain(queue)).map((m) => (JSON.parse(m.content.toString()) as { id: string }).id),
  );
  const lost = ids.filter((id) => !delivered.has(id));
  console.log(`[outbox-chain] control: ${lost.length} of ${count} messages never reached the broker`);
  // The inbox still made every local effect exactly once: what the control loses is the message.
  expect((await db.ledger.check({ expectedIds: ids })).ok).toBe(true);
  expect(lost.length).toBeGreaterThan(0);
});
