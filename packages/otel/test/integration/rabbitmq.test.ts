import { type Handler, PermanentError } from '@once/core';
import { createRabbitConsumer, type RabbitConsumer } from '@once/rabbitmq';
import { trace } from '@opentelemetry/api';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { AMQP_URL, amqpAdmin, unique, waitFor } from '../../../rabbitmq/test/integration/fixtures/env.js';
import { instrument, traced } from '../../src/index.js';
import {
  histogramCount,
  metricsHarness,
  PARENT_SPAN_ID,
  pointsOf,
  sumOf,
  TRACE_ID,
  TRACEPARENT,
  tracingHarness,
} from '../fixtures/telemetry.js';

// A real RabbitMQ consumer with an instrumented inbox and a traced handler: the dead-letter and
// retry paths through the broker, and a producer's traceparent header becoming the handler's parent.

const run = unique('otel-rmq');
const queue = unique(`${run}-q`);
let db: Awaited<ReturnType<typeof freshDb>>;
let admin: Awaited<ReturnType<typeof amqpAdmin>>;
let consumer: RabbitConsumer | undefined;
const m = metricsHarness();
const t = tracingHarness();

beforeAll(async () => {
  db = await freshDb('otel_rmq', 6);
  admin = await amqpAdmin(run);
});
afterAll(async () => {
  await consumer?.stop();
  await admin?.dropTopology(queue, [50]);
  await admin?.close();
  await db?.close();
  await m.shutdown();
  await t.shutdown();
});

it('counts outcomes and dead letters, and parents the handler span on the traceparent header', async () => {
  const done = new Set<string>();
  const activeSpan = new Map<string, string | undefined>();
  let flakyRuns = 0;
  const handler: Handler = async (e, { tx }) => {
    activeSpan.set(e.id!, trace.getActiveSpan()?.spanContext().spanId);
    if (e.id === 'poison') throw new PermanentError('unparseable order');
    if (e.id === 'flaky' && ++flakyRuns === 1) throw new Error('downstream timeout');
    await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
    done.add(e.id!);
  };
  consumer = createRabbitConsumer({
    url: AMQP_URL,
    queue,
    pool: db.pool,
    schema: db.schema,
    consumer: 'orders',
    retryTiersMs: [50],
    retryDelayMs: () => 50,
    maxAttempts: 3,
    socketOptions: { clientProperties: { connection_name: `${run}-consumer` } },
    handler: traced(handler, { tracerProvider: t.tracerProvider, propagator: t.propagator }),
  });
  const instrumentation = instrument(consumer, { meterProvider: m.meterProvider, pool: false });
  await consumer.start();

  await admin.publish(queue, '{"n":1}', {
    messageId: 'traced',
    headers: { traceparent: TRACEPARENT, tracestate: 'shop=eu' },
  });
  await admin.publish(queue, '{"n":2}', { messageId: 'poison' });
  await admin.publish(queue, '{"n":3}', { messageId: 'flaky' });

  // The dead letter is counted when the consumer reports it dead-lettered (after the DLX publish and the ack).
  await waitFor(
    async () => sumOf(await m.collect(), 'once.dead_letters') === 1,
    30_000,
    'dead letter counted',
  );
  await waitFor(() => done.has('traced') && done.has('flaky'), 30_000, 'traced and flaky processed');
  await waitFor(
    async () => sumOf(await m.collect(), 'once.messages', { 'once.outcome': 'processed' }) === 2,
    30_000,
    'processed counted',
  );

  const metrics = await m.collect();
  const base = {
    'once.consumer': 'orders',
    'messaging.system': 'rabbitmq',
    'messaging.destination.name': queue,
  };
  const outcome = (o: string) => sumOf(metrics, 'once.messages', { ...base, 'once.outcome': o });
  expect(outcome('processed')).toBe(2);
  expect(outcome('retry')).toBe(1);
  expect(outcome('failed')).toBe(1);
  expect(pointsOf(metrics, 'once.dead_letters')[0]).toMatchObject({
    value: 1,
    // The fail reason, as on the other brokers (it was the outcome, 'failed', on RabbitMQ alone).
    attributes: { ...base, 'once.dead_letter.reason': 'permanent', 'once.dead_letter.target': 'exchange' },
  });
  expect(await admin.count(`${queue}.dead`)).toBe(1);
  // traced, poison, flaky twice.
  expect(histogramCount(metrics, 'once.handler.duration', base)).toBe(4);
  expect(histogramCount(metrics, 'once.process.duration', base)).toBe(4);

  // The handler span of "traced" continues the producer's trace; the handler ran inside it.
  const spans = t.exporter.getFinishedSpans();
  const span = spans.find((s) => s.attributes['messaging.message.id'] === 'traced');
  expect(span).toBeDefined();
  expect(span!.name).toBe(`process ${queue}`);
  expect(span!.spanContext().traceId).toBe(TRACE_ID);
  expect(span!.parentSpanContext?.spanId).toBe(PARENT_SPAN_ID);
  expect(span!.spanContext().traceState?.get('shop')).toBe('eu');
  expect(activeSpan.get('traced')).toBe(span!.spanContext().spanId);
  // Messages without trace headers start their own traces; the poison one's span carries the error.
  const poison = spans.find((s) => s.attributes['messaging.message.id'] === 'poison');
  expect(poison!.parentSpanContext).toBeUndefined();
  expect(poison!.attributes['error.type']).toBe('PERMANENT');
  expect(spans.filter((s) => s.attributes['messaging.message.id'] === 'flaky')).toHaveLength(2);
  instrumentation.close();
});
