// Which Kafka client library the once consumers under test run on, one switch for the TypeScript
// tests and the .mjs child processes alike: ONCE_KAFKA_CLIENT = kafkajs (the default),
// platformatic or confluent. Only the consumer (or publisher) under test goes through it; a
// test's own producing, reading back and admin calls stay on kafkajs (test/support/kafka.ts), so a
// suite asks the same questions of every client. ONCE_KAFKA_GROUP_PROTOCOL = consumer asks the
// clients that speak it for the KIP-848 group protocol; classic is the default.

/** The client libraries @once/kafka runs on. */
export const KAFKA_CLIENTS = Object.freeze(['kafkajs', 'platformatic', 'confluent']);

/** The client this run tests (ONCE_KAFKA_CLIENT); an unknown name is an error, never a silent default. */
export function kafkaClientName() {
  const name = process.env.ONCE_KAFKA_CLIENT || 'kafkajs';
  if (!KAFKA_CLIENTS.includes(name)) {
    throw new Error(`ONCE_KAFKA_CLIENT=${name} is not a client (${KAFKA_CLIENTS.join(', ')})`);
  }
  return name;
}

/** The group protocol this run asks for (ONCE_KAFKA_GROUP_PROTOCOL): classic or consumer (KIP-848). */
export function kafkaGroupProtocol() {
  const p = process.env.ONCE_KAFKA_GROUP_PROTOCOL || 'classic';
  if (p !== 'classic' && p !== 'consumer') {
    throw new Error(`ONCE_KAFKA_GROUP_PROTOCOL=${p} is not a group protocol (classic, consumer)`);
  }
  return p;
}

/** The test brokers (KAFKA_BROKERS, comma-separated; scripts/services' 127.0.0.1:9092 by default). */
export function testBrokers() {
  return (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',').filter(Boolean);
}

/**
 * A once Kafka client (the value of a consumer's or publisher's `kafka` option) on the run's
 * client library. `brokers`: where it connects (a fault proxy, say); the test brokers by default.
 */
export async function onceKafka(clientId, brokers = testBrokers()) {
  const name = kafkaClientName();
  if (name === 'kafkajs') {
    if (kafkaGroupProtocol() !== 'classic') {
      throw new Error('kafkajs speaks only the classic group protocol (ONCE_KAFKA_GROUP_PROTOCOL=consumer)');
    }
    const { Kafka, logLevel } = await import('kafkajs');
    const { kafkajs } = await import('@once/kafka/kafkajs');
    return kafkajs(
      new Kafka({
        clientId,
        brokers: [...brokers],
        logLevel: process.env.KAFKAJS_LOG ? logLevel.INFO : logLevel.NOTHING,
        retry: { retries: 8, initialRetryTime: 100 },
      }),
    );
  }
  if (name === 'platformatic') {
    const { platformatic } = await import('@once/kafka/platformatic');
    return platformatic(
      { clientId, bootstrapBrokers: [...brokers], retries: 8, retryDelay: 100 },
      kafkaGroupProtocol() === 'consumer'
        ? { consumer: { groupProtocol: 'consumer' }, groupTimeouts: true }
        : {},
    );
  }
  if (name === 'confluent') {
    let KafkaJS;
    try {
      ({ KafkaJS } = await import('@confluentinc/kafka-javascript'));
    } catch (err) {
      throw new Error(
        'ONCE_KAFKA_CLIENT=confluent: @confluentinc/kafka-javascript is not installed here ' +
          `(${err?.code ?? err}): run scripts/confluent-install (it builds the addon once and links it)`,
      );
    }
    const { confluent } = await import('@once/kafka/confluent');
    const consumer = kafkaGroupProtocol() === 'consumer' ? { 'group.protocol': 'consumer' } : {};
    return confluent(
      new KafkaJS.Kafka({
        // librdkafka's own log lines (syslog levels): errors only unless KAFKAJS_LOG is set.
        log_level: process.env.KAFKAJS_LOG ? 6 : 3,
        kafkaJS: {
          clientId,
          brokers: [...brokers],
          logLevel: process.env.KAFKAJS_LOG ? KafkaJS.logLevel.INFO : KafkaJS.logLevel.NOTHING,
        },
      }),
      { consumer },
    );
  }
  throw new Error(`ONCE_KAFKA_CLIENT=${name}: @once/kafka has no ${name} client yet`);
}
