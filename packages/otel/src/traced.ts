import type { Envelope, Handler } from '@once/core';
import {
  type Attributes,
  type Context,
  context,
  propagation,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import { Attr, destinationOf, systemOf } from './attributes.js';
import { type Headers, headerGetter } from './header-getter.js';
import { SCOPE_NAME, SCOPE_VERSION } from './scope.js';

/** Something that reads a context from a carrier: the global `propagation` or any `TextMapPropagator`. */
export interface ContextExtractor {
  /** Reads the trace context out of a carrier (the message's headers). */
  extract<C>(context: Context, carrier: C, getter: TextMapGetter<C>): Context;
}

/** Options of {@link traced}. */
export interface TracedOptions {
  /** @default the global provider (`trace.getTracerProvider()`) */
  tracerProvider?: TracerProvider | undefined;
  /**
   * Reads the producer's context (`traceparent`, `tracestate`) from the envelope's headers.
   * The global one is a no-op until an SDK registers a propagator.
   * @default the global propagator (`propagation` from @opentelemetry/api)
   */
  propagator?: ContextExtractor | undefined;
}

/**
 * Wraps a handler so that each run is a CONSUMER span named `process <destination>`, a child of
 * the context the message carries (W3C `traceparent`/`tracestate` in Kafka headers, SQS message
 * attributes or AMQP headers), else of the active context. The handler runs with that span
 * active, so spans it starts (database, HTTP) nest under it. A throw is recorded on the span and
 * rethrown unchanged: once's outcome logic sees exactly what the handler threw.
 */
export function traced<R>(handler: Handler<R>, options: TracedOptions = {}): Handler<R> {
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE_NAME, SCOPE_VERSION);
  const propagator = options.propagator ?? propagation;
  return (envelope, ctx) => {
    const parent = propagator.extract<Headers>(context.active(), envelope.headers, headerGetter);
    const destination = destinationOf(envelope.source.broker, envelope.source.queue);
    const attributes: Attributes = {
      ...spanSource(envelope),
      [Attr.operationType]: 'process',
      [Attr.operationName]: 'process',
      [Attr.messageId]: ctx.id,
      [Attr.consumer]: ctx.consumer,
      [Attr.attempt]: ctx.attempt,
    };
    return tracer.startActiveSpan(
      `process ${destination}`,
      { kind: SpanKind.CONSUMER, attributes },
      parent,
      async (span) => {
        try {
          return await handler(envelope, ctx);
        } catch (err) {
          const error = err instanceof Error ? err : new Error(String(err));
          span.recordException(error);
          span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
          span.setAttribute(Attr.errorType, errorTypeOfThrown(err));
          throw err;
        } finally {
          span.end();
        }
      },
    );
  };
}

function spanSource(envelope: Envelope): Attributes {
  const { broker, queue, partition, group } = envelope.source;
  const out: Attributes = {
    [Attr.system]: systemOf(broker),
    [Attr.destination]: destinationOf(broker, queue),
  };
  if (partition !== undefined) out[Attr.partition] = String(partition);
  if (group !== undefined && broker === 'kafka') out[Attr.consumerGroup] = group;
  return out;
}

/** `error.type` of a thrown value: its string `code` when it has one, else its class name. */
function errorTypeOfThrown(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.length > 0) return code;
    return err.constructor?.name ?? 'Error';
  }
  return typeof err;
}
