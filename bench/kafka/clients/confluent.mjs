// The @confluentinc/kafka-javascript consumers of bench/kafka (its KafkaJS-compatible API over
// librdkafka): the floor written by hand on that library, and the once client
// `@once/kafka/confluent`. `ctx` is the bench's run context (bench/kafka/run.mjs).
//
// The floor is kafkajs's floor on this API: per message, eachMessage with autoCommit on (the
// library stores a message's offset after eachMessage returns, and librdkafka commits what is
// stored: after COMMIT); batched, eachBatch with autoCommit and auto-resolve off, one transaction
// per slice, then `resolveOffset` and `commitOffsetsIfNecessary` (which commits the resolved
// offsets). Its batches are at most `js.consumer.max.batch.size` messages (32 by default); the
// floor and once both run with BENCH_SLICE there, so a batch is one slice as on kafkajs.
// `heartbeat()` is a no-op on this client (librdkafka heartbeats in its own thread).
import { floorBatch, floorOne } from '../../support/floor.mjs';

/** The library, the once entry, and the once client factory; throws when the library does not resolve. */
export async function load(ctx) {
  const mod = await import('@confluentinc/kafka-javascript');
  const { KafkaJS } = mod.default ?? mod;
  const connection = () =>
    new KafkaJS.Kafka({
      kafkaJS: { clientId: ctx.run, brokers: ctx.brokers, logLevel: KafkaJS.logLevel.NOTHING },
    });
  const batchSize = { 'js.consumer.max.batch.size': ctx.slice };
  return {
    version: ctx.versionOf('@confluentinc/kafka-javascript'),
    variants: variants(ctx, connection(), batchSize),
    async onceClient() {
      const { confluent } = await import('@once/kafka/confluent');
      // The entry's signature as issue #30's bench brief gives it: the KafkaJS-API client, then
      // the consumer's own settings.
      return () => confluent(connection(), { consumer: batchSize });
    },
    onceOptions: {},
  };
}

function variants(ctx, kafka, batchSize) {
  const idOf = (m) => m.headers['message-id'].toString();
  const amountOf = (m) => JSON.parse(m.value.toString()).amount;

  /** `group` (fresh) on the run's topic, run with `run`; resolves its stop. */
  async function running(group, autoCommit, run) {
    const c = kafka.consumer({
      kafkaJS: {
        groupId: group,
        fromBeginning: true,
        autoCommit,
        sessionTimeout: ctx.settings.sessionTimeout,
        heartbeatInterval: ctx.settings.heartbeatInterval,
        maxBytesPerPartition: ctx.settings.maxBytesPerPartition,
      },
      ...batchSize,
    });
    await c.connect();
    await c.subscribe({ topics: [ctx.topic()] });
    await c.run({ partitionsConsumedConcurrently: ctx.concurrency, ...run });
    return () => c.disconnect();
  }

  return {
    'floor/msg': (progress, group) =>
      running(group, true, {
        eachMessage: async ({ message, heartbeat }) => {
          const id = idOf(message);
          const amount = amountOf(message);
          let t;
          await ctx.untilCommitted(1, heartbeat, () => {
            t = performance.now();
            return floorOne(ctx.pool, ctx.schema, 'floor-kafka', id, (q) =>
              ctx.effect(q, 'floormsg', id, amount),
            );
          });
          progress(1, performance.now() - t);
        },
      }),
    'floor/batch': (progress, group) =>
      running(group, false, {
        eachBatchAutoResolve: false,
        eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat }) => {
          for (let i = 0; i < batch.messages.length; i += ctx.slice) {
            const slice = batch.messages.slice(i, i + ctx.slice);
            let t;
            await ctx.untilCommitted(slice.length, heartbeat, () => {
              t = performance.now();
              return floorBatch(ctx.pool, ctx.schema, 'floor-kafka', slice, idOf, (q, m) =>
                ctx.effect(q, 'floorbatch', idOf(m), amountOf(m)),
              );
            });
            resolveOffset(slice[slice.length - 1].offset);
            await commitOffsetsIfNecessary();
            progress(slice.length, performance.now() - t);
          }
        },
      }),
  };
}
