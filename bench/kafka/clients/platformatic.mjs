// The @platformatic/kafka consumers of bench/kafka: the floor written by hand on that library, and
// the once client `@once/kafka/platformatic`. `ctx` is the bench's run context (bench/kafka/run.mjs).
//
// The library has no eachMessage or eachBatch: a group consumer gives one stream of the messages of
// every assigned partition. The floor is what a user writes on it to get kafkajs's
// `partitionsConsumedConcurrently`: one lane per partition (offset order kept), up to `concurrency`
// lanes working at once, the stream paused while too many messages wait. Autocommit is off (its
// autocommit commits what was fetched, not what was processed): per message, each message's
// `commit()` after its COMMIT, not awaited (the library merges commits, one in flight, as kafkajs's
// autocommit commits after eachMessage without waiting per message); batched, the slice's last
// message's `commit()` after the slice's COMMIT, awaited before the lane's next slice.
// Each group has one member in the bench, so the floor does not handle a revocation (a lane's
// messages of a partition lost to a rebalance would still run, their commits refused or late).
import { floorBatch, floorOne } from '../../support/floor.mjs';

/** The library, the once entry, and the once client factory; throws when the library does not resolve. */
export async function load(ctx) {
  const { Consumer, stringDeserializer } = await import('@platformatic/kafka');
  return {
    version: ctx.versionOf('@platformatic/kafka'),
    variants: variants(ctx, Consumer, stringDeserializer),
    async onceClient() {
      const { platformatic } = await import('@once/kafka/platformatic');
      // The entry's signature as issue #30's bench brief gives it: connection options, then the
      // consumer's own settings.
      return () =>
        platformatic(
          { clientId: ctx.run, bootstrapBrokers: ctx.brokers },
          { consumer: { maxBytesPerPartition: ctx.settings.maxBytesPerPartition } },
        );
    },
    onceOptions: {},
  };
}

/**
 * Runs `stream` in lanes, one per partition: `work(messages)` gets up to `take` waiting messages of
 * one partition, in offset order, at most `concurrency` calls at once; the stream is paused while
 * `limit` messages wait and resumed below half of it. A failure goes to `fail`.
 */
export function lanes(stream, { concurrency, take, limit, work, fail }) {
  const byPartition = new Map();
  let waiting = 0;
  let free = concurrency;
  const queue = [];
  const acquire = () => {
    if (free > 0) {
      free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => queue.push(resolve));
  };
  const release = () => {
    const next = queue.shift();
    if (next) next();
    else free++;
  };
  async function drain(lane) {
    lane.running = true;
    try {
      while (lane.messages.length > 0) {
        await acquire();
        try {
          const messages = lane.messages.splice(0, take);
          await work(messages);
          waiting -= messages.length;
          if (stream.isPaused() && waiting < limit / 2) stream.resume();
        } finally {
          release();
        }
      }
    } catch (err) {
      fail(err);
    } finally {
      lane.running = false;
    }
  }
  stream.on('data', (m) => {
    const key = `${m.topic}:${m.partition}`;
    let lane = byPartition.get(key);
    if (!lane) {
      lane = { messages: [], running: false };
      byPartition.set(key, lane);
    }
    lane.messages.push(m);
    waiting++;
    if (waiting >= limit) stream.pause();
    if (!lane.running) void drain(lane);
  });
  stream.on('error', fail);
}

function variants(ctx, Consumer, stringDeserializer) {
  const limit = Math.max(1_000, ctx.slice * 6);
  const idOf = (m) => m.headers.get('message-id');
  const amountOf = (m) => JSON.parse(m.value.toString()).amount;
  const noHeartbeat = async () => {};

  /** `group` (fresh) on the run's topic, its stream run in lanes of `take`; resolves its stop. */
  async function running(group, take, work) {
    const consumer = new Consumer({
      clientId: group,
      bootstrapBrokers: ctx.brokers,
      groupId: group,
      sessionTimeout: ctx.settings.sessionTimeout,
      heartbeatInterval: ctx.settings.heartbeatInterval,
      maxBytesPerPartition: ctx.settings.maxBytesPerPartition,
      deserializers: { headerKey: stringDeserializer, headerValue: stringDeserializer },
    });
    const stream = await consumer.consume({
      topics: [ctx.topic()],
      mode: 'committed',
      fallbackMode: 'earliest',
      autocommit: false,
    });
    lanes(stream, { concurrency: ctx.concurrency, take, limit, work, fail: ctx.fail });
    return async () => {
      await stream.close();
      await consumer.close(true);
    };
  }

  return {
    'floor/msg': (progress, group) =>
      running(group, 1, async ([m]) => {
        const id = idOf(m);
        const amount = amountOf(m);
        let t;
        await ctx.untilCommitted(1, noHeartbeat, () => {
          t = performance.now();
          return floorOne(ctx.pool, ctx.schema, 'floor-kafka', id, (q) =>
            ctx.effect(q, 'floormsg', id, amount),
          );
        });
        progress(1, performance.now() - t);
        m.commit().catch(ctx.fail);
      }),
    'floor/batch': (progress, group) =>
      running(group, ctx.slice, async (slice) => {
        let t;
        await ctx.untilCommitted(slice.length, noHeartbeat, () => {
          t = performance.now();
          return floorBatch(ctx.pool, ctx.schema, 'floor-kafka', slice, idOf, (q, m) =>
            ctx.effect(q, 'floorbatch', idOf(m), amountOf(m)),
          );
        });
        await slice[slice.length - 1].commit();
        progress(slice.length, performance.now() - t);
      }),
  };
}
