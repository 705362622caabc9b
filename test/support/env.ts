/** Where the integration tests find the real services; the loopback defaults match `scripts/services`. */
export interface ServiceUrls {
  /** PostgreSQL connection string (`DATABASE_URL`). */
  readonly databaseUrl: string;
  /** Kafka bootstrap brokers (`KAFKA_BROKERS`, comma-separated), ready for kafkajs' `brokers`. */
  readonly kafkaBrokers: readonly string[];
  /** ElasticMQ / SQS endpoint (`SQS_ENDPOINT`). */
  readonly sqsEndpoint: string;
  /** RabbitMQ AMQP url (`AMQP_URL`). */
  readonly amqpUrl: string;
  /** NATS server url (`NATS_URL`), JetStream on. */
  readonly natsUrl: string;
}

/** The environment variable each service is read from, and its loopback default. */
export const SERVICE_ENV_DEFAULTS = Object.freeze({
  DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test',
  KAFKA_BROKERS: '127.0.0.1:9092',
  SQS_ENDPOINT: 'http://127.0.0.1:9324',
  AMQP_URL: 'amqp://guest:guest@127.0.0.1:5672',
  NATS_URL: 'nats://127.0.0.1:4222',
});

/** Names of the variables in {@link SERVICE_ENV_DEFAULTS}. */
export type ServiceEnvName = keyof typeof SERVICE_ENV_DEFAULTS;

/** Reads one service variable; an empty value counts as unset. */
export function serviceEnv(name: ServiceEnvName): string {
  const value = process.env[name];
  return value ? value : SERVICE_ENV_DEFAULTS[name];
}

/** The service urls, from the environment (set by the global setup) or the loopback defaults. */
export function serviceUrls(): ServiceUrls {
  return Object.freeze({
    databaseUrl: serviceEnv('DATABASE_URL'),
    kafkaBrokers: Object.freeze(
      serviceEnv('KAFKA_BROKERS')
        .split(',')
        .map((b) => b.trim())
        .filter(Boolean),
    ),
    sqsEndpoint: serviceEnv('SQS_ENDPOINT'),
    amqpUrl: serviceEnv('AMQP_URL'),
    natsUrl: serviceEnv('NATS_URL'),
  });
}

/** How much bigger than their default sizes the heavier tests run (`ONCE_SCALE`, default 1). */
export const SCALE = Number(process.env.ONCE_SCALE ?? 1);
