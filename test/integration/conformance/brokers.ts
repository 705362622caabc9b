import type { BrokerHarness, BrokerName, ConformanceDb } from './harness.js';
import { kafkaHarness } from './kafka-harness.js';
import { natsHarness } from './nats-harness.js';
import { rabbitmqHarness } from './rabbitmq-harness.js';
import { sqsHarness } from './sqs-harness.js';

/** Every adapter the suite holds to the contract, for `describe.each`. */
export const BROKERS: readonly (readonly [BrokerName, (db: ConformanceDb) => BrokerHarness])[] = [
  ['kafka', kafkaHarness],
  ['sqs', sqsHarness],
  ['rabbitmq', rabbitmqHarness],
  ['nats', natsHarness],
];
