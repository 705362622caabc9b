import type { Counter, Histogram, Meter, ObservableGauge } from '@opentelemetry/api';

/** Buckets for the duration histograms, in seconds: the messaging conventions' advice, plus 1 and 2.5 ms. */
export const DURATION_BUCKETS_S: readonly number[] = Object.freeze([
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
]);

/**
 * The messaging semantic conventions this package follows for its `messaging.*` metrics and
 * attributes: OpenTelemetry semantic conventions v1.32.0, messaging metrics (status Development).
 */
export const SEMCONV_VERSION = '1.32.0';

/** Every metric name this package records (see the README's table). */
export const MetricName = {
  messages: 'once.messages',
  /** Semantic conventions: the duration of each process operation. */
  messagingProcessDuration: 'messaging.process.duration',
  /** Semantic conventions: messages delivered to the application, once per delivery. */
  messagingConsumedMessages: 'messaging.client.consumed.messages',
  processDuration: 'once.process.duration',
  handlerDuration: 'once.handler.duration',
  deadLetters: 'once.dead_letters',
  leaseTakeovers: 'once.lease.takeovers',
  inboxRows: 'once.inbox.rows',
  purgeLag: 'once.inbox.purge.lag',
  outboxMessages: 'once.outbox.messages',
  outboxPending: 'once.outbox.pending',
  outboxLag: 'once.outbox.lag',
} as const;

/** The synchronous instruments fed by events. */
export interface EventInstruments {
  messages: Counter;
  messagingProcessDuration: Histogram;
  messagingConsumedMessages: Counter;
  processDuration: Histogram;
  handlerDuration: Histogram;
  deadLetters: Counter;
  leaseTakeovers: Counter;
  outboxMessages: Counter;
}

/** Creates the event-fed instruments on `meter`. */
export function eventInstruments(meter: Meter): EventInstruments {
  const advice = { explicitBucketBoundaries: [...DURATION_BUCKETS_S] };
  return {
    messages: meter.createCounter(MetricName.messages, {
      description:
        'Messages that reached an outcome, by outcome (processed, duplicate, conflict, failed, retry, not-run, busy).',
      unit: '{message}',
    }),
    // The semantic conventions' own names, descriptions and units (their bucket advice is ours
    // without the 1 and 2.5 ms boundaries: a superset).
    messagingProcessDuration: meter.createHistogram(MetricName.messagingProcessDuration, {
      description: 'Duration of processing operation.',
      unit: 's',
      advice,
    }),
    messagingConsumedMessages: meter.createCounter(MetricName.messagingConsumedMessages, {
      description: 'Number of messages that were delivered to the application.',
      unit: '{message}',
    }),
    processDuration: meter.createHistogram(MetricName.processDuration, {
      description:
        'Time from the start of processing to the outcome: claim, handler and commit (for a batch, the batch so far).',
      unit: 's',
      advice,
    }),
    handlerDuration: meter.createHistogram(MetricName.handlerDuration, {
      description: "The handler's own run time, up to its return, throw or deadline.",
      unit: 's',
      advice,
    }),
    deadLetters: meter.createCounter(MetricName.deadLetters, {
      description: 'Messages an adapter moved to its dead-letter destination (or discarded, per its policy).',
      unit: '{message}',
    }),
    leaseTakeovers: meter.createCounter(MetricName.leaseTakeovers, {
      description: 'Lease-mode claims that took a message over from a worker whose lease had run out.',
      unit: '{message}',
    }),
    outboxMessages: meter.createCounter(MetricName.outboxMessages, {
      description: 'Outbox rows the relay sent, failed to send (to be retried) or parked as failed.',
      unit: '{message}',
    }),
  };
}

/** The gauges read from PostgreSQL at each collection. */
export interface InboxGauges {
  rows: ObservableGauge;
  purgeLag: ObservableGauge;
}

export interface OutboxGauges {
  pending: ObservableGauge;
  lag: ObservableGauge;
}

export function inboxGauges(meter: Meter): InboxGauges {
  return {
    rows: meter.createObservableGauge(MetricName.inboxRows, {
      description:
        "Rows in the inbox table: PostgreSQL's estimate (pg_class.reltuples) as of the last ANALYZE; before the first, counted up to 10,000, and not observed past that.",
      unit: '{row}',
    }),
    purgeLag: meter.createObservableGauge(MetricName.purgeLag, {
      description: 'Age of the oldest expired inbox row that purge has not deleted yet; 0 when none.',
      unit: 's',
    }),
  };
}

export function outboxGauges(meter: Meter): OutboxGauges {
  return {
    pending: meter.createObservableGauge(MetricName.outboxPending, {
      description: 'Pending outbox rows, counted up to outboxPendingLimit.',
      unit: '{message}',
    }),
    lag: meter.createObservableGauge(MetricName.outboxLag, {
      description: 'Age of the oldest pending outbox row; 0 when none.',
      unit: 's',
    }),
  };
}
