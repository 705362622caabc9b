import { kafkajsClient } from './kafkajs.js';
import { isKafkaClient, type KafkaClient, type KafkaLike } from './types.js';

/**
 * The client a `kafka` option names: a {@link KafkaClient} as given, or a raw kafkajs `Kafka`
 * instance wrapped as the kafkajs client (what `kafka` was before the seam; kafkajs itself is
 * loaded only once a producer is made). Anything else: `undefined`. `producerOnly`: the publisher
 * needs only the producer factory of a raw instance.
 */
export function clientOf(value: unknown, producerOnly = false): KafkaClient | undefined {
  if (isKafkaClient(value)) return value;
  const raw = value as Partial<KafkaLike> | null | undefined;
  if (
    typeof raw === 'object' &&
    raw !== null &&
    typeof raw.producer === 'function' &&
    (producerOnly || (typeof raw.consumer === 'function' && typeof raw.admin === 'function'))
  )
    return kafkajsClient(raw as KafkaLike);
  return undefined;
}

/** What an INVALID_OPTION error says to write instead. */
export const CLIENT_HINT =
  "must be a Kafka client: kafkajs(new Kafka({ brokers })) from '@once/kafka/kafkajs', or a kafkajs Kafka instance";
