import { silentLogger } from '@once/core/adapter';
import { quoteIdentifier } from '@once/core/admin';
import { metrics } from '@opentelemetry/api';
import { observeInbox, observeOutbox } from './db-gauges.js';
import {
  subscribeKafkaDeadLetters,
  subscribeNatsDeadLetters,
  subscribeRabbitDeadLetters,
  subscribeSqsDeadLetters,
} from './dead-letter-metrics.js';
import { subscribeInbox } from './inbox-metrics.js';
import {
  checkInstrumentOptions,
  DEFAULT_INSTRUMENT_OPTIONS,
  type InstrumentOptions,
} from './instrument-options.js';
import { eventInstruments } from './instruments.js';
import { subscribeRelay } from './relay-metrics.js';
import { SCOPE_NAME, SCOPE_VERSION } from './scope.js';
import { type InboxLike, type InstrumentTarget, kindOf } from './targets.js';

/** What {@link instrument} returns: stop recording. */
export interface Instrumentation {
  /** Removes every event listener and gauge callback this instrumentation added. Idempotent. */
  close(): void;
}

/**
 * Records metrics for an inbox, an adapter consumer (its inbox, plus its dead letters) or an
 * outbox relay, from their events, and registers gauges read from PostgreSQL. Nothing is
 * recorded for events before the call. Tracing is separate: wrap the handler with `traced()`.
 */
export function instrument(target: InstrumentTarget, options: InstrumentOptions = {}): Instrumentation {
  const o = checkInstrumentOptions(options);
  const kind = kindOf(target);
  const meter = (o.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE_NAME, SCOPE_VERSION);
  const m = eventInstruments(meter);
  const off: (() => void)[] = [];
  let inbox: InboxLike | undefined;
  switch (kind.kind) {
    case 'inbox':
      inbox = kind.inbox;
      break;
    case 'relay':
      off.push(subscribeRelay(kind.relay, m));
      break;
    case 'kafka':
      inbox = kind.consumer.inbox;
      off.push(subscribeKafkaDeadLetters(kind.consumer, m));
      break;
    case 'sqs':
      inbox = kind.consumer.inbox;
      off.push(subscribeSqsDeadLetters(kind.consumer, m));
      break;
    case 'rabbitmq':
      inbox = kind.consumer.inbox;
      off.push(subscribeRabbitDeadLetters(kind.consumer, m));
      break;
    case 'nats':
      inbox = kind.consumer.inbox;
      off.push(subscribeNatsDeadLetters(kind.consumer, m));
      break;
    case 'consumer':
      inbox = kind.consumer.inbox;
      break;
  }
  if (inbox) off.push(subscribeInbox(inbox, m));
  const pool = o.pool === false ? undefined : (o.pool ?? inbox?.options.pool);
  if (pool) {
    const schema = o.schema ?? inbox?.options.schema ?? DEFAULT_INSTRUMENT_OPTIONS.schema;
    // Checked here, so a bad name fails instrument() rather than every collection.
    quoteIdentifier(schema, "option 'schema'");
    const spec = {
      meter,
      pool,
      schema,
      logger: o.logger === false ? silentLogger : (o.logger ?? inbox?.options.logger ?? silentLogger),
    };
    const routing = o.pool === undefined ? inbox?.options.routing : undefined;
    if (inbox && routing) {
      // An inbox over several databases: its gauges per database, each tagged with its name.
      for (const [database, p] of routing.pools) off.push(observeInbox({ ...spec, pool: p, database }));
    } else if (inbox) off.push(observeInbox(spec));
    else off.push(observeOutbox(spec, o.outboxPendingLimit ?? DEFAULT_INSTRUMENT_OPTIONS.outboxPendingLimit));
  }
  return {
    close() {
      for (const f of off.splice(0)) f();
    },
  };
}
