// The kafkajs consumers of bench/kafka: the ceiling (raw), B1 (no inbox) and the floor written by
// hand on kafkajs 2.2.4, and the once client `@once/kafka/kafkajs`. `ctx` is the bench's run
// context (bench/kafka/run.mjs, `context`).
import { bareTransaction } from '../../support/faults.mjs';
import { floorBatch, floorOne } from '../../support/floor.mjs';

/** The library, the once entry, and the once client factory; throws when kafkajs does not resolve. */
export async function load(ctx) {
  const { Kafka, logLevel } = await import('kafkajs');
  const kafka = new Kafka({ clientId: ctx.run, brokers: ctx.brokers, logLevel: logLevel.NOTHING });
  return {
    version: ctx.versionOf('kafkajs'),
    variants: variants(ctx, kafka),
    async onceClient() {
      const { kafkajs } = await import('@once/kafka/kafkajs');
      return () =>
        kafkajs(new Kafka({ clientId: ctx.run, brokers: ctx.brokers, logLevel: logLevel.NOTHING }));
    },
    onceOptions: { consumerConfig: { maxBytesPerPartition: ctx.settings.maxBytesPerPartition } },
  };
}

function variants(ctx, kafka) {
  const plainConsumer = (group) => kafka.consumer({ groupId: group, ...ctx.settings });

  /**
   * The batched loop over a kafkajs batch: `work(slice)` in one transaction per slice (again while
   * it fails), offsets after.
   */
  const sliced =
    (work, progress) =>
    async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat }) => {
      for (let i = 0; i < batch.messages.length; i += ctx.slice) {
        const slice = batch.messages.slice(i, i + ctx.slice);
        let t;
        await ctx.untilCommitted(slice.length, heartbeat, () => {
          t = performance.now();
          return work(slice);
        });
        const last = slice[slice.length - 1].offset;
        resolveOffset(last);
        await commitOffsetsIfNecessary({
          topics: [
            {
              topic: batch.topic,
              partitions: [{ partition: batch.partition, offset: String(BigInt(last) + 1n) }],
            },
          ],
        });
        progress(slice.length, performance.now() - t);
        await heartbeat();
      }
    };

  /** Subscribes `group` (fresh) to the run's topic and runs it with `config`; resolves its stop. */
  async function running(group, config) {
    const c = plainConsumer(group);
    await c.connect();
    await c.subscribe({ topics: [ctx.topic()], fromBeginning: true });
    await c.run({ partitionsConsumedConcurrently: ctx.concurrency, ...config });
    return () => c.disconnect();
  }
  const idOf = (m) => m.headers['message-id'].toString();
  const amountOf = (m) => JSON.parse(m.value.toString()).amount;

  return {
    raw: (progress, group) =>
      running(group, { eachBatch: async ({ batch }) => progress(batch.messages.length, 0) }),
    'B1/msg': (progress, group) =>
      running(group, {
        eachMessage: async ({ message, heartbeat }) => {
          const amount = amountOf(message);
          let t;
          await ctx.untilCommitted(1, heartbeat, () => {
            t = performance.now();
            return bareTransaction(ctx.pool, (client) => ctx.effect(client, 'b1msg', idOf(message), amount));
          });
          progress(1, performance.now() - t);
        },
      }),
    'B1/batch': (progress, group) =>
      running(group, {
        autoCommit: false,
        eachBatchAutoResolve: false,
        eachBatch: sliced(async (slice) => {
          await bareTransaction(ctx.pool, async (client) => {
            for (const m of slice) await ctx.effect(client, 'b1batch', idOf(m), amountOf(m));
          });
        }, progress),
      }),
    'floor/msg': (progress, group) =>
      running(group, {
        eachMessage: async ({ message, heartbeat }) => {
          const amount = amountOf(message);
          const id = idOf(message);
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
      running(group, {
        autoCommit: false,
        eachBatchAutoResolve: false,
        eachBatch: sliced(
          (slice) =>
            floorBatch(ctx.pool, ctx.schema, 'floor-kafka', slice, idOf, (q, m) =>
              ctx.effect(q, 'floorbatch', idOf(m), amountOf(m)),
            ),
          progress,
        ),
      }),
  };
}
