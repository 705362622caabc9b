import type { OnceEventMap } from '@once/core';
import { silentLogger, TypedEmitter } from '@once/core/adapter';
import { afterAll, describe, expect, it } from 'vitest';
import { instrument } from '../../src/index.js';
import { metricsHarness, pointsOf, sumOf } from '../fixtures/telemetry.js';

// Each adapter reports a dead letter with its own event; these consumers are stand-ins made of
// core's real emitter, shaped like each adapter (the RabbitMQ path runs against the broker in
// test/integration/rabbitmq.test.ts).

const h = metricsHarness();
afterAll(() => h.shutdown());

function consumerWith<M extends object>(name: string, options: object) {
  const inboxEvents = new TypedEmitter<OnceEventMap>(silentLogger);
  const events = new TypedEmitter<M>(silentLogger);
  const pool = {
    query: () => Promise.reject(new Error('unused')),
    connect: () => Promise.reject(new Error('unused')),
  };
  return {
    events,
    consumer: {
      inbox: {
        consumer: name,
        options: { pool, schema: 'once', logger: silentLogger },
        on: inboxEvents.on.bind(inboxEvents),
      },
      options,
      on: events.on.bind(events),
    },
  };
}

describe('dead letters', () => {
  it('Kafka: message:dead-lettered, by topic, reason and whether a dead-letter topic took it', async () => {
    const { consumer, events } = consumerWith<{
      'message:dead-lettered': { source: { queue: string }; reason: string; deadLetter: string | undefined };
    }>('k', { topics: ['orders'] });
    const handle = instrument(consumer, { meterProvider: h.meterProvider, pool: false });
    events.emit('message:dead-lettered', {
      source: { queue: 'orders' },
      reason: 'max-attempts',
      deadLetter: 'orders.dlq',
    });
    events.emit('message:dead-lettered', {
      source: { queue: 'orders' },
      reason: 'invalid-id',
      deadLetter: undefined,
    });
    handle.close();
    events.emit('message:dead-lettered', {
      source: { queue: 'orders' },
      reason: 'max-attempts',
      deadLetter: 'orders.dlq',
    });
    const m = await h.collect();
    const base = {
      'once.consumer': 'k',
      'messaging.system': 'kafka',
      'messaging.destination.name': 'orders',
    };
    expect(sumOf(m, 'once.dead_letters', base)).toBe(2);
    expect(
      sumOf(m, 'once.dead_letters', {
        ...base,
        'once.dead_letter.reason': 'max-attempts',
        'once.dead_letter.target': 'topic',
      }),
    ).toBe(1);
    expect(
      sumOf(m, 'once.dead_letters', {
        ...base,
        'once.dead_letter.reason': 'invalid-id',
        'once.dead_letter.target': 'discard',
      }),
    ).toBe(1);
  });

  it('SQS: message:dead-lettered, by queue name, reason and target', async () => {
    const { consumer, events } = consumerWith<{
      'message:dead-lettered': { reason: string; deadLetter: string | undefined };
    }>('s', {
      queueUrl: 'http://127.0.0.1:9324/000000000000/payments.fifo',
    });
    const handle = instrument(consumer, { meterProvider: h.meterProvider, pool: false });
    events.emit('message:dead-lettered', {
      reason: 'permanent',
      deadLetter: 'arn:aws:sqs:elasticmq:000000000000:payments-dlq.fifo',
    });
    handle.close();
    const m = await h.collect();
    expect(pointsOf(m, 'once.dead_letters', { 'once.consumer': 's' })[0]).toMatchObject({
      value: 1,
      attributes: {
        'messaging.system': 'aws_sqs',
        'messaging.destination.name': 'payments.fifo',
        'once.dead_letter.reason': 'permanent',
        'once.dead_letter.target': 'redrive',
      },
    });
  });

  it('NATS: message:dead-lettered, by subject, reason and whether a dead-letter subject took it', async () => {
    const { consumer, events } = consumerWith<{
      'message:dead-lettered': { reason: string; deadLetter: string | undefined };
    }>('n', { subject: 'orders.>', durable: 'billing' });
    const handle = instrument(consumer, { meterProvider: h.meterProvider, pool: false });
    events.emit('message:dead-lettered', { reason: 'permanent', deadLetter: 'once.dead.billing' });
    events.emit('message:dead-lettered', { reason: 'invalid-id', deadLetter: undefined });
    handle.close();
    const m = await h.collect();
    const base = {
      'once.consumer': 'n',
      'messaging.system': 'nats',
      'messaging.destination.name': 'orders.>',
    };
    expect(sumOf(m, 'once.dead_letters', { ...base, 'once.dead_letter.target': 'subject' })).toBe(1);
    expect(sumOf(m, 'once.dead_letters', { ...base, 'once.dead_letter.target': 'discard' })).toBe(1);
  });

  it('RabbitMQ: message:dead-lettered, by its reason as on the other brokers (not the outcome)', async () => {
    const { consumer, events } = consumerWith<{
      settled: { status: string; plan: string };
      'message:dead-lettered': { reason: string; deadLetter: string | undefined };
    }>('r', { queue: 'emails' });
    const handle = instrument(consumer, { meterProvider: h.meterProvider, pool: false });
    // A settled event alone counts nothing: the dead-lettered event follows a dead letter.
    events.emit('settled', { status: 'failed', plan: 'dead-letter' });
    events.emit('message:dead-lettered', { reason: 'max-attempts', deadLetter: 'emails.dlx' });
    events.emit('message:dead-lettered', { reason: 'conflict', deadLetter: 'emails.dlx' });
    handle.close();
    const m = await h.collect();
    const r = (reason: string) =>
      sumOf(m, 'once.dead_letters', {
        'once.consumer': 'r',
        'once.dead_letter.reason': reason,
        'once.dead_letter.target': 'exchange',
      });
    expect(sumOf(m, 'once.dead_letters', { 'once.consumer': 'r' })).toBe(2);
    expect(r('max-attempts')).toBe(1);
    expect(r('conflict')).toBe(1);
    expect(r('failed')).toBe(0);
  });
});
