import { SQSClient } from '@aws-sdk/client-sqs';
import type { Inbox, Relay } from '@once/core';
import { createKafkaConsumer, type KafkaConsumer } from '@once/kafka';
import { createRabbitConsumer, type RabbitConsumer } from '@once/rabbitmq';
import { createSqsConsumer, type SqsConsumer } from '@once/sqs';
import { Kafka } from 'kafkajs';
import pg from 'pg';
import { afterAll, describe, expect, expectTypeOf, it } from 'vitest';
import type {
  InstrumentTarget,
  KafkaConsumerLike,
  RabbitConsumerLike,
  SqsConsumerLike,
} from '../../src/index.js';
import { kindOf } from '../../src/targets.js';

// The structural views must keep fitting the real classes, and the runtime tell-apart must pick
// each adapter's own events. Nothing here connects: consumers are built, never started.

const pool = new pg.Pool({ max: 1 });
afterAll(() => pool.end());

describe('real adapter consumers', () => {
  it('fit the structural target types', () => {
    expectTypeOf<Inbox<{ ok: true }>>().toExtend<InstrumentTarget>();
    expectTypeOf<Relay>().toExtend<InstrumentTarget>();
    expectTypeOf<KafkaConsumer<number>>().toExtend<KafkaConsumerLike>();
    expectTypeOf<SqsConsumer<string>>().toExtend<SqsConsumerLike>();
    expectTypeOf<RabbitConsumer>().toExtend<RabbitConsumerLike>();
  });

  it('are told apart at run time', () => {
    const handler = () => {};
    const kafka = createKafkaConsumer({
      kafka: new Kafka({ brokers: ['127.0.0.1:1'] }),
      groupId: 'g',
      topics: ['orders'],
      pool,
      consumer: 'k',
      handler,
    });
    const sqs = createSqsConsumer({
      client: new SQSClient({ region: 'us-east-1', endpoint: 'http://127.0.0.1:1' }),
      queueUrl: 'http://127.0.0.1:1/000000000000/payments',
      pool,
      consumer: 's',
      handler,
    });
    const rabbit = createRabbitConsumer({
      url: 'amqp://127.0.0.1:1',
      queue: 'emails',
      pool,
      consumer: 'r',
      handler,
    });
    expect(kindOf(kafka).kind).toBe('kafka');
    expect(kindOf(sqs).kind).toBe('sqs');
    expect(kindOf(rabbit).kind).toBe('rabbitmq');
    expect(kindOf(kafka.inbox).kind).toBe('inbox');
  });
});
