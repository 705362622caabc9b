import { readFileSync } from 'node:fs';
import type { Envelope, HandlerContext } from '@once/core';
import { type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { traced } from '../../src/index.js';
import { PARENT_SPAN_ID, TRACE_ID, TRACEPARENT, tracingHarness } from '../fixtures/telemetry.js';

const t = tracingHarness();
afterEach(() => t.exporter.reset());
afterAll(() => t.shutdown());

function envelope(headers: Record<string, string>, source: Partial<Envelope['source']> = {}): Envelope {
  return {
    id: 'm-1',
    body: Buffer.from('{}'),
    headers,
    source: { broker: 'kafka', queue: 'orders', partition: 3, offset: '42', group: 'billing', ...source },
    attempt: 2,
    redelivered: true,
  };
}

// The wrapper only reads id, consumer and attempt; the rest would be core's.
const ctx = {
  id: 'm-1',
  consumer: 'billing',
  attempt: 2,
} as HandlerContext;

const options = () => ({ tracerProvider: t.tracerProvider, propagator: t.propagator });

describe('traced', () => {
  it("runs the handler inside a CONSUMER span whose parent is the message's traceparent", async () => {
    let active: Span | undefined;
    const handler = traced(() => {
      active = trace.getActiveSpan();
      return 'ok';
    }, options());
    await expect(handler(envelope({ traceparent: TRACEPARENT, tracestate: 'vendor=1' }), ctx)).resolves.toBe(
      'ok',
    );
    const [span] = t.exporter.getFinishedSpans();
    expect(span).toBeDefined();
    expect(span!.name).toBe('process orders');
    expect(span!.kind).toBe(SpanKind.CONSUMER);
    expect(span!.spanContext().traceId).toBe(TRACE_ID);
    expect(span!.parentSpanContext?.spanId).toBe(PARENT_SPAN_ID);
    expect(span!.parentSpanContext?.isRemote).toBe(true);
    expect(span!.spanContext().traceState?.get('vendor')).toBe('1');
    expect(active?.spanContext().spanId).toBe(span!.spanContext().spanId);
    expect(span!.attributes).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.destination.name': 'orders',
      'messaging.destination.partition.id': '3',
      'messaging.consumer.group.name': 'billing',
      'messaging.operation.type': 'process',
      'messaging.message.id': 'm-1',
      'once.consumer': 'billing',
      'once.attempt': 2,
    });
    expect(span!.status.code).toBe(SpanStatusCode.UNSET);
  });

  it("names its instrumentation scope with this package's version (issue #29: it was undefined)", async () => {
    await traced(() => 'ok', options())(envelope({}), ctx);
    const [span] = t.exporter.getFinishedSpans();
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    expect(span!.instrumentationScope).toEqual({ name: '@once/otel', version, schemaUrl: undefined });
  });

  it('finds the header whatever its case, and names SQS destinations by queue name', async () => {
    const handler = traced(async () => undefined, options());
    const sqs = envelope(
      { Traceparent: TRACEPARENT },
      { broker: 'sqs', queue: 'http://127.0.0.1:9324/000000000000/payments.fifo' },
    );
    await handler(sqs, ctx);
    const [span] = t.exporter.getFinishedSpans();
    expect(span!.parentSpanContext?.spanId).toBe(PARENT_SPAN_ID);
    expect(span!.name).toBe('process payments.fifo');
    expect(span!.attributes['messaging.system']).toBe('aws_sqs');
  });

  it('without trace headers the span is a root (or a child of the active span)', async () => {
    const handler = traced(() => undefined, options());
    await handler(envelope({}), ctx);
    const [root] = t.exporter.getFinishedSpans();
    expect(root!.parentSpanContext).toBeUndefined();
    t.exporter.reset();
    const outer = t.tracerProvider.getTracer('test');
    await outer.startActiveSpan('outer', async (span) => {
      await handler(envelope({}), ctx);
      span.end();
    });
    const [inner, parent] = t.exporter.getFinishedSpans();
    expect(inner!.parentSpanContext?.spanId).toBe(parent!.spanContext().spanId);
  });

  it('records a throw on the span and rethrows the very same error', async () => {
    const boom = Object.assign(new Error('card declined'), { code: 'CARD_DECLINED' });
    const handler = traced(() => {
      throw boom;
    }, options());
    await expect(handler(envelope({ traceparent: TRACEPARENT }), ctx)).rejects.toBe(boom);
    const [span] = t.exporter.getFinishedSpans();
    expect(span!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'card declined' });
    expect(span!.attributes['error.type']).toBe('CARD_DECLINED');
    expect(span!.events.map((e) => e.name)).toEqual(['exception']);
  });

  it('a malformed traceparent is ignored, not thrown', async () => {
    const handler = traced(() => 1, options());
    await expect(handler(envelope({ traceparent: 'garbage' }), ctx)).resolves.toBe(1);
    expect(t.exporter.getFinishedSpans()[0]!.parentSpanContext).toBeUndefined();
  });
});
