import { DEAD_LETTER_RECORD } from '@once/core/adapter';
import { createRabbitConsumer, jsonHandler, type RabbitConsumer } from '@once/rabbitmq';
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { serviceUrls, uniqueName } from '../../support/index.js';
import {
  type BrokerHarness,
  type ConformanceDb,
  type ConsumerSpec,
  type DeadLetterCopy,
  type DeadLetterDetail,
  type Destination,
  deadLetterWhy,
  inboxOptionsOf,
} from './harness.js';

/** Settings shared with fixtures/consumer-child.mjs: quorum queues, the adapter's recommended type. */
export const RABBIT_CONSUMER_SETTINGS = Object.freeze({
  queueType: 'quorum' as const,
  prefetch: 20,
  stopTimeoutMs: 20_000,
});

const exchangeOf = (dest: Destination) => `${dest.name}.in`;

/**
 * RabbitMQ: a quorum queue bound with `#` to a topic exchange, so each message's routing key is
 * its key (the adapter's `envelope.key`), consumed by createRabbitConsumer; dead letters land in
 * `<queue>.dead`, which the adapter declares.
 */
export function rabbitmqHarness(db: ConformanceDb): BrokerHarness {
  const url = serviceUrls().amqpUrl;
  let conn: ChannelModel | undefined;
  let ch: ConfirmChannel | undefined;
  const queues: string[] = [];
  const running = new Map<RabbitConsumer, string>();
  // Retry tiers each consumer of a queue declared, so close() deletes their queues too.
  const tiers = new Map<string, number[]>();
  const channel = async (): Promise<ConfirmChannel> => {
    if (!ch) {
      conn = await amqp.connect(url, { clientProperties: { connection_name: uniqueName('conformance') } });
      conn.on('error', () => {});
      ch = await conn.createConfirmChannel();
      ch.on('error', () => {});
    }
    return ch;
  };
  /** Ready messages; a missing queue is a 404 that closes the channel, so ask on a throwaway one. */
  const ready = async (queue: string): Promise<number> => {
    await channel();
    const c = await conn!.createChannel();
    c.on('error', () => {});
    try {
      return (await c.checkQueue(queue)).messageCount;
    } catch {
      return 0;
    } finally {
      await c.close().catch(() => {});
    }
  };

  async function deadLetterDetails(
    dest: Destination,
    count: number,
    timeoutMs = 30_000,
  ): Promise<DeadLetterDetail[]> {
    const c = await channel();
    const got: DeadLetterDetail[] = [];
    const until = Date.now() + timeoutMs;
    const text = (v: unknown) => (v === undefined || v === null ? undefined : String(v));
    while (got.length < count && Date.now() < until) {
      const m = await c.get(`${dest.name}.dead`, { noAck: true });
      if (!m) {
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      const h = (m.properties.headers ?? {}) as Record<string, unknown>;
      const headerId = h['message-id'] as Buffer | string | undefined;
      const id = m.properties.messageId ?? (headerId === undefined ? undefined : String(headerId));
      got.push({
        id,
        rawId:
          m.properties.messageId !== undefined
            ? Buffer.from(m.properties.messageId)
            : headerId === undefined
              ? undefined
              : Buffer.from(headerId),
        body: m.content,
        ...deadLetterWhy(h[DEAD_LETTER_RECORD] as Buffer | string | undefined),
      });
    }
    return got;
  }

  return {
    broker: 'rabbitmq',
    async create(prefix) {
      const queue = uniqueName(prefix);
      queues.push(queue);
      const c = await channel();
      await c.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      await c.assertExchange(exchangeOf({ name: queue }), 'topic', { durable: true });
      await c.bindQueue(queue, exchangeOf({ name: queue }), '#');
      return { name: queue };
    },

    async publish(dest, messages) {
      const c = await channel();
      for (const m of messages) {
        // amqplib's messageId is a string of at most 255 bytes: bytes and long ids go in a header.
        const inHeader = m.id !== undefined && (m.idInHeader === true || Buffer.isBuffer(m.id));
        const headers = { ...m.headers, ...(inHeader ? { 'message-id': m.id } : {}) };
        const ok = c.publish(exchangeOf(dest), m.key, Buffer.from(m.body), {
          ...(m.id === undefined || inHeader ? {} : { messageId: m.id }),
          ...(Object.keys(headers).length > 0 ? { headers } : {}),
          persistent: true,
        });
        if (!ok) await new Promise((r) => c.once('drain', r));
      }
      await c.waitForConfirms();
    },

    async start(dest, spec: ConsumerSpec) {
      const consumer = createRabbitConsumer({
        url,
        queue: dest.name,
        pool: db.pool,
        schema: db.schema,
        consumer: spec.consumer,
        handler: spec.handler,
        ...RABBIT_CONSUMER_SETTINGS,
        ...inboxOptionsOf(spec.options),
        ...(spec.options?.retryDelayMs === undefined ? {} : { retryTiersMs: [spec.options.retryDelayMs] }),
        ...(spec.options?.batch === undefined ? {} : { batch: spec.options.batch }),
      });
      tiers.set(dest.name, [...(tiers.get(dest.name) ?? []), spec.options?.retryDelayMs ?? 0]);
      running.set(consumer, dest.name);
      spec.listen?.(consumer.inbox);
      await consumer.start();
      return {
        inbox: consumer.inbox,
        async stop() {
          running.delete(consumer);
          await consumer.stop();
        },
      };
    },

    balanced: () => true,

    async settled(dest) {
      // Ready counts leave out what consumers hold unacked: ask running consumers for that.
      for (const [c, queue] of running) {
        const h = c.health();
        if (queue === dest.name && (h.unsettled > 0 || h.active > 0)) {
          return false;
        }
      }
      return (await ready(dest.name)) === 0;
    },

    async deadLetters(dest, count, timeoutMs = 30_000): Promise<DeadLetterCopy[]> {
      return (await deadLetterDetails(dest, count, timeoutMs)).map(({ id, reason }) => ({ id, reason }));
    },

    deadLetterDetails,
    jsonHandler,

    childConfig(dest) {
      return { broker: 'rabbitmq', queue: dest.name, ...RABBIT_CONSUMER_SETTINGS };
    },

    async close() {
      for (const c of running.keys()) await c.stop().catch(() => {});
      running.clear();
      if (!ch) return;
      for (const q of queues) {
        for (const name of [
          q,
          `${q}.dead`,
          ...[1000, 10000, 60000, ...(tiers.get(q) ?? [])].map((t) => `${q}.retry.${t}ms`),
        ]) {
          await ch.deleteQueue(name).catch(() => {});
        }
        await ch.deleteExchange(`${q}.dlx`).catch(() => {});
        await ch.deleteExchange(`${q}.in`).catch(() => {});
      }
      await conn?.close().catch(() => {});
    },
  };
}
