import type { Channel } from 'amqplib';
import type { ResolvedRabbitConsumerOptions } from './options.js';

/** The names of every queue and exchange a consumer owns. */
export interface Topology {
  queue: string;
  /** One retry queue per delay tier, keyed by the delay in ms. */
  retry: ReadonlyMap<number, string>;
  deadLetterExchange: string;
  deadLetterQueue: string | false;
}

/** Derives the names: `<queue>.retry.<ms>ms`, the dead-letter exchange and queue. */
export function topologyOf(o: ResolvedRabbitConsumerOptions): Topology {
  return {
    queue: o.queue,
    retry: new Map(o.retryTiersMs.map((ms) => [ms, `${o.queue}.retry.${ms}ms`])),
    deadLetterExchange: o.deadLetterExchange,
    deadLetterQueue: o.deadLetterQueue,
  };
}

/** The retry tier for a delay: the smallest one at least that long, else the longest. */
export function tierFor(delayMs: number, tiers: readonly number[]): number {
  for (const t of tiers) if (t >= delayMs) return t;
  return tiers[tiers.length - 1]!;
}

/**
 * Declares (idempotently) what the consumer owns. Each retry tier is a queue with a queue-level
 * TTL that dead-letters back to the work queue through the default exchange: a per-message TTL
 * only expires at the head of a queue, so a 1 s retry would wait behind a 60 s one.
 * A failure (404 missing queue, 406 different arguments) closes the channel; the caller maps it.
 */
export async function declareTopology(
  ch: Channel,
  o: ResolvedRabbitConsumerOptions,
  t: Topology,
): Promise<void> {
  const type = { 'x-queue-type': o.queueType };
  if (o.assertQueue) await ch.assertQueue(t.queue, { durable: true, arguments: type });
  else await ch.checkQueue(t.queue);
  for (const [ms, name] of t.retry) {
    await ch.assertQueue(name, {
      durable: true,
      arguments: {
        ...type,
        'x-message-ttl': ms,
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': t.queue,
        // Quorum queues dead-letter at most once unless told otherwise; at-least-once needs reject-publish.
        ...(o.queueType === 'quorum'
          ? { 'x-dead-letter-strategy': 'at-least-once', 'x-overflow': 'reject-publish' }
          : {}),
      },
    });
  }
  await ch.assertExchange(t.deadLetterExchange, 'direct', { durable: true });
  if (t.deadLetterQueue !== false) {
    await ch.assertQueue(t.deadLetterQueue, { durable: true, arguments: type });
    await ch.bindQueue(t.deadLetterQueue, t.deadLetterExchange, t.queue);
  }
}
