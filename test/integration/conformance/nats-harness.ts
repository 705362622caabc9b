import {
  AckPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { connect, type NatsConnection, headers as natsHeaders } from '@nats-io/transport-node';
import { DEAD_LETTER_RECORD } from '@once/core/adapter';
import { createNatsConsumer, jsonHandler, type NatsConsumer, ORIGINAL_ID_HEADER } from '@once/nats';
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
  startTracked,
} from './harness.js';

/**
 * Settings shared with fixtures/consumer-child.mjs. The id travels in the `message-id` header
 * rather than `Nats-Msg-Id`: JetStream drops a second `Nats-Msg-Id` within the stream's
 * `duplicate_window` (at least 100 ms) at publish, and the suite wants every copy to reach the
 * adapter. A short handler deadline keeps `ack_wait` (above it) short, so a killed consumer's
 * messages come back within seconds.
 */
export const NATS_CONSUMER_SETTINGS = Object.freeze({
  idHeader: 'message-id',
  handlerTimeoutMs: 5_000,
  ackWaitMs: 8_000,
  stopTimeoutMs: 20_000,
});

/** A JetStream name (stream, durable) from a suite name. */
export const jsName = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');
const subjectOf = (dest: Destination) => `${dest.name}.in`;
const deadOf = (dest: Destination) => `${dest.name}.dead`;
/** A key as one subject token: the subject is the adapter's `envelope.key`. */
const tokenOf = (key: string) => key.replace(/[^A-Za-z0-9_-]/g, '_') || '_';

/**
 * NATS JetStream: one stream per destination capturing `<name>.in.>` (each key one subject token)
 * and `<name>.dead`, consumed by createNatsConsumer through a durable named after the suite's
 * consumer; dead letters are read back through a durable of their own.
 */
export function natsHarness(db: ConformanceDb): BrokerHarness {
  const url = serviceUrls().natsUrl;
  let client: Promise<{ nc: NatsConnection; js: JetStreamClient; jsm: JetStreamManager }> | undefined;
  const streams: string[] = [];
  const running = new Set<NatsConsumer>();
  const nats = () => {
    client ??= (async () => {
      const nc = await connect({ servers: url, name: uniqueName('conformance') });
      return { nc, js: jetstream(nc), jsm: await jetstreamManager(nc) };
    })();
    return client;
  };

  async function deadLetterDetails(
    dest: Destination,
    count: number,
    timeoutMs = 30_000,
  ): Promise<DeadLetterDetail[]> {
    const { js, jsm } = await nats();
    const reader = 'dead-reader';
    await jsm.consumers
      .add(dest.name, { durable_name: reader, ack_policy: AckPolicy.Explicit, filter_subject: deadOf(dest) })
      .catch(() => {});
    const c = await js.consumers.get(dest.name, reader);
    const got: DeadLetterDetail[] = [];
    const until = Date.now() + timeoutMs;
    while (got.length < count && Date.now() < until) {
      const m = await c.next({ expires: Math.max(1_000, Math.min(5_000, until - Date.now())) });
      if (!m) continue;
      m.ack();
      const why = deadLetterWhy(m.headers?.get(DEAD_LETTER_RECORD) || undefined);
      const original = m.headers?.get('message-id') || m.headers?.get(ORIGINAL_ID_HEADER) || undefined;
      got.push({
        id: why.record?.id ?? original,
        rawId: original === undefined ? undefined : Buffer.from(original),
        body: Buffer.from(m.data),
        ...why,
      });
    }
    return got;
  }

  return {
    broker: 'nats',
    async create(prefix) {
      const name = jsName(uniqueName(prefix));
      const { jsm } = await nats();
      await jsm.streams.add({ name, subjects: [`${name}.in.>`, `${name}.dead`] });
      streams.push(name);
      return { name };
    },

    async publish(dest, messages) {
      const { js } = await nats();
      for (const m of messages) {
        const h = natsHeaders();
        for (const [k, v] of Object.entries(m.headers ?? {}))
          h.set(k, typeof v === 'string' ? v : v.toString('utf8'));
        // nats.js writes header values as UTF-8 text: raw bytes cannot be carried as they are.
        if (m.id !== undefined) h.set('message-id', typeof m.id === 'string' ? m.id : m.id.toString('utf8'));
        await js.publish(`${subjectOf(dest)}.${tokenOf(m.key)}`, Buffer.from(m.body), { headers: h });
      }
    },

    async start(dest, spec: ConsumerSpec) {
      const consumer = createNatsConsumer({
        servers: url,
        subject: `${subjectOf(dest)}.>`,
        stream: dest.name,
        durable: jsName(spec.consumer),
        deadLetterSubject: deadOf(dest),
        pool: db.pool,
        schema: db.schema,
        consumer: spec.consumer,
        handler: spec.handler,
        ...NATS_CONSUMER_SETTINGS,
        ...inboxOptionsOf(spec.options),
        ...(spec.options?.batch === undefined ? {} : { batch: spec.options.batch }),
      });
      return startTracked(consumer, spec, running);
    },

    balanced: () => true,

    async settled(dest, consumer) {
      const { jsm } = await nats();
      const info = await jsm.consumers.info(dest.name, jsName(consumer)).catch(() => undefined);
      return info !== undefined && info.num_pending === 0 && info.num_ack_pending === 0;
    },

    async deadLetters(dest, count, timeoutMs = 30_000): Promise<DeadLetterCopy[]> {
      return (await deadLetterDetails(dest, count, timeoutMs)).map(({ id, reason }) => ({ id, reason }));
    },

    deadLetterDetails,
    jsonHandler,

    childConfig(dest, consumer) {
      return {
        broker: 'nats',
        subject: `${subjectOf(dest)}.>`,
        stream: dest.name,
        durable: jsName(consumer),
        deadLetterSubject: deadOf(dest),
        ...NATS_CONSUMER_SETTINGS,
      };
    },

    async close() {
      for (const c of running) await c.stop().catch(() => {});
      running.clear();
      if (!client) return;
      const { nc, jsm } = await client;
      for (const s of streams) await jsm.streams.delete(s).catch(() => {});
      await nc.close().catch(() => {});
    },
  };
}
