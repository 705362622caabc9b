import type { Admin, Consumer, Kafka, Producer } from 'kafkajs';

/**
 * The part of a kafkajs `Kafka` instance this package uses. Declared as a `Pick` so the binding
 * to kafkajs stays thin (docs/pitfalls.md K5): three factories and nothing else.
 */
export type KafkaLike = Pick<Kafka, 'consumer' | 'producer' | 'admin'>;

/** A kafkajs consumer, producer and admin client, as this package drives them. */
export type { Admin as AdminLike, Consumer as ConsumerLike, Producer as ProducerLike };

/** Error types kafkajs raises when this member's generation is over: its partitions may have moved. */
const OWNERSHIP_LOST = new Set([
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'NOT_COORDINATOR_FOR_GROUP',
  'FENCED_INSTANCE_ID',
]);

/**
 * True for a kafkajs error that means "rejoin the group": stop resolving and committing for the
 * batch at hand and hand the error back to kafkajs, whose runner rejoins on it.
 */
export function isOwnershipLost(err: unknown): boolean {
  const type = (err as { type?: unknown } | null)?.type;
  return typeof type === 'string' && OWNERSHIP_LOST.has(type);
}
