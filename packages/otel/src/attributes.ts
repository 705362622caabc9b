import type { EnvelopeSource } from '@once/core';
import type { Attributes } from '@opentelemetry/api';

/**
 * Attribute keys. `messaging.*` and `error.type` are OpenTelemetry's semantic conventions;
 * `once.*` are this package's own. Keys are constants so metrics and spans cannot drift apart.
 */
export const Attr = {
  consumer: 'once.consumer',
  outcome: 'once.outcome',
  failReason: 'once.fail.reason',
  notRunReason: 'once.not_run.reason',
  conflictAction: 'once.conflict.action',
  deadLetterReason: 'once.dead_letter.reason',
  deadLetterTarget: 'once.dead_letter.target',
  outboxResult: 'once.outbox.result',
  schema: 'once.schema',
  attempt: 'once.attempt',
  system: 'messaging.system',
  destination: 'messaging.destination.name',
  partition: 'messaging.destination.partition.id',
  consumerGroup: 'messaging.consumer.group.name',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  messageId: 'messaging.message.id',
  errorType: 'error.type',
  /** The database a message was routed to, or a gauge read from (an inbox over several `databases`). */
  dbNamespace: 'db.namespace',
} as const;

/** once's broker names mapped to the semantic conventions' `messaging.system` values. */
const SYSTEMS: Readonly<Record<string, string>> = Object.freeze({
  kafka: 'kafka',
  sqs: 'aws_sqs',
  rabbitmq: 'rabbitmq',
  nats: 'nats',
});

/** The `messaging.system` value of an adapter's broker name; unknown names pass through. */
export function systemOf(broker: string): string {
  return SYSTEMS[broker] ?? broker;
}

/**
 * The `messaging.destination.name` of a source: the topic or queue name. An SQS queue URL is
 * reduced to its last path segment (the queue name), which is what dashboards group by.
 */
export function destinationOf(broker: string, queue: string): string {
  if (broker !== 'sqs' || !queue.includes('://')) return queue;
  const path = queue.replace(/\/+$/, '');
  return path.slice(path.lastIndexOf('/') + 1) || queue;
}

/** The attributes every per-message metric carries: consumer, system and destination. */
export function messageAttributes(consumer: string, source: EnvelopeSource): Attributes {
  return {
    [Attr.consumer]: consumer,
    [Attr.system]: systemOf(source.broker),
    [Attr.destination]: destinationOf(source.broker, source.queue),
  };
}

/** `error.type`: the error's code when it has one (low cardinality), else its class name. */
export function errorTypeOf(error: { name: string; code?: string | undefined }): string {
  return error.code ?? error.name;
}

/** `messaging.operation.name` of the process operation: once processes each delivered message. */
export const PROCESS_OPERATION = 'process';

/**
 * The attributes of the semantic-convention metrics (`messaging.process.duration`,
 * `messaging.client.consumed.messages`): the required `messaging.system` and
 * `messaging.operation.name`, the destination, the Kafka consumer group when known (an SQS
 * message group is per message, not a consumer group), `error.type` when the operation failed,
 * and `once.consumer` to tell inboxes on one destination apart.
 */
export function semconvAttributes(
  consumer: string,
  source: EnvelopeSource,
  errorType: string | undefined,
): Attributes {
  const attrs: Attributes = {
    ...messageAttributes(consumer, source),
    [Attr.operationName]: PROCESS_OPERATION,
  };
  if (source.broker === 'kafka' && source.group !== undefined) attrs[Attr.consumerGroup] = source.group;
  if (errorType !== undefined) attrs[Attr.errorType] = errorType;
  return attrs;
}
