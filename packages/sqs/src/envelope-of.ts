import type { Message } from '@aws-sdk/client-sqs';
import type { Envelope, Liveness } from '@once/core';
import type { SqsIdSource } from './options.js';
import { BODY_ENCODING_ATTRIBUTE } from './sqs-body.js';

/** What {@link envelopeOf} needs to know about the queue and the id. */
export interface EnvelopeSettings {
  queueUrl: string;
  idFrom: SqsIdSource;
  idHeader: string;
}

/**
 * Maps an SQS message to core's envelope. Headers are the message attributes (String and Number
 * values as sent, Binary ones base64). A body that once's publisher sent as base64 (attribute
 * `once-body-encoding: base64`) is decoded back to its bytes. ApproximateReceiveCount rises for
 * every message of a receive when a consumer dies, so anything above 1 is marked redelivered (a
 * suspect: core runs it one per transaction). It is also the first `attempt`, an upper bound of
 * the handler's runs, until the inbox judges by its start count in Postgres instead (`StartBudget.attemptIsStarts`;
 * the envelope's `attempt` stays as delivered).
 */
export function envelopeOf(message: Message, settings: EnvelopeSettings, liveness?: Liveness): Envelope {
  const attrs = message.Attributes ?? {};
  const headers: Record<string, string | undefined> = {};
  const attributes = message.MessageAttributes;
  // for-in, not Object.entries: no array of pairs per message.
  for (const name in attributes) {
    const value = attributes[name]!;
    headers[name] =
      value.StringValue ??
      (value.BinaryValue ? Buffer.from(value.BinaryValue).toString('base64') : undefined);
  }
  // once's publisher sends bytes SQS cannot carry as text in base64 and says so: decode them, and
  // keep the transport detail out of the headers.
  const base64 = headers[BODY_ENCODING_ATTRIBUTE] === 'base64';
  if (base64) delete headers[BODY_ENCODING_ATTRIBUTE];
  const count = Number.parseInt(attrs.ApproximateReceiveCount ?? '1', 10);
  const attempt = Number.isFinite(count) && count >= 1 ? count : 1;
  const group = attrs.MessageGroupId;
  let id: string | undefined;
  switch (settings.idFrom) {
    case 'header':
      id = headers[settings.idHeader];
      break;
    case 'deduplication-id':
      id = attrs.MessageDeduplicationId;
      break;
    case 'sqs-message-id':
      id = message.MessageId;
      break;
  }
  // The optional fields set only when present (no key at all otherwise), without object spreads.
  // idFrom goes with a failed message's origin: a republish to a FIFO queue must know whether
  // the consumer reads the MessageDeduplicationId.
  const source: Envelope['source'] = { broker: 'sqs', queue: settings.queueUrl, idFrom: settings.idFrom };
  if (group !== undefined) source.group = group;
  if (attrs.SequenceNumber !== undefined) source.offset = attrs.SequenceNumber;
  if (message.MessageId !== undefined) source.delivery = message.MessageId;
  const envelope: Envelope = {
    id,
    body: Buffer.from(message.Body ?? '', base64 ? 'base64' : 'utf8'),
    headers,
    key: group,
    source,
    attempt,
    redelivered: attempt > 1,
  };
  // Lease mode: core's lease clock drives the message's visibility once it is claimed.
  if (liveness) envelope.liveness = liveness;
  return envelope;
}
