// @ts-check
// The once Kafka client of the examples' consumers and publishers, on the client library
// ONCE_KAFKA_CLIENT names: kafkajs (the default), platformatic (@platformatic/kafka) or confluent
// (@confluentinc/kafka-javascript, built by scripts/confluent-install). Only the client object
// changes; every once option stays the same. The examples' own producing, topics and lag reads
// stay on kafkajs. `ONCE_KAFKA_CLIENT=platformatic npm run demo` runs the demo's Kafka rows on
// @platformatic/kafka.
//
// In an application, import the one entry you use instead, e.g.
//   import { kafkajs } from '@once/kafka/kafkajs';
//   const kafka = kafkajs(new Kafka({ clientId, brokers }));

/** The client libraries @once/kafka runs on. */
export const KAFKA_CLIENTS = Object.freeze(['kafkajs', 'platformatic', 'confluent']);

/** The library ONCE_KAFKA_CLIENT names (kafkajs when unset); another name is an error. */
export function kafkaClientName() {
  const name = process.env.ONCE_KAFKA_CLIENT || 'kafkajs';
  if (!KAFKA_CLIENTS.includes(name)) {
    throw new Error(`ONCE_KAFKA_CLIENT=${name} is not a Kafka client library (${KAFKA_CLIENTS.join(', ')})`);
  }
  return name;
}

/**
 * Loads an entry that is an optional peer: a missing one says what to install.
 * @param {string} specifier
 * @param {string} install
 * @returns {Promise<Record<string, unknown>>}
 */
async function optional(specifier, install) {
  try {
    return await import(specifier);
  } catch (err) {
    const code = /** @type {{ code?: string }} */ (err).code;
    if (code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') {
      throw new Error(
        `ONCE_KAFKA_CLIENT=${kafkaClientName()}: this build of @once/kafka has no ${specifier}`,
        {
          cause: err,
        },
      );
    }
    if (code === 'ERR_MODULE_NOT_FOUND') {
      throw new Error(`ONCE_KAFKA_CLIENT=${kafkaClientName()} needs ${specifier}: ${install}`, {
        cause: err,
      });
    }
    throw err;
  }
}

/**
 * A once Kafka client (the `kafka` option of createKafkaConsumer and createKafkaPublisher) on the
 * library ONCE_KAFKA_CLIENT names, quiet: once reports through its own events and logger.
 * @param {{ clientId: string, brokers: string[] }} o
 * @returns {Promise<import('@once/kafka').KafkaClient>}
 */
export async function onceKafkaClient({ clientId, brokers }) {
  const name = kafkaClientName();
  if (name === 'platformatic') {
    // The entries of the other two libraries are loaded by name (they are optional peers).
    const entry = await optional('@once/kafka/platformatic', 'npm install @platformatic/kafka');
    const platformatic = /** @type {(o: object) => import('@once/kafka').KafkaClient} */ (entry.platformatic);
    return platformatic({ clientId, bootstrapBrokers: brokers });
  }
  if (name === 'confluent') {
    const entry = await optional('@once/kafka/confluent', 'bash scripts/confluent-install --link');
    const lib = await optional('@confluentinc/kafka-javascript', 'bash scripts/confluent-install --link');
    const confluent = /** @type {(k: object) => import('@once/kafka').KafkaClient} */ (entry.confluent);
    const { KafkaJS } =
      /** @type {{ KafkaJS: { Kafka: new (c: object) => object, logLevel: { NOTHING: number } } }} */ (
        /** @type {unknown} */ (lib)
      );
    return confluent(
      new KafkaJS.Kafka({ kafkaJS: { clientId, brokers, logLevel: KafkaJS.logLevel.NOTHING } }),
    );
  }
  const { Kafka, logLevel } = await import('kafkajs');
  const { kafkajs } = await import('@once/kafka/kafkajs');
  return kafkajs(new Kafka({ clientId, brokers, logLevel: logLevel.NOTHING }));
}
