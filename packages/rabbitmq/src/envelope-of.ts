import type { Envelope } from '@once/core';
import { decodedIdCheck } from '@once/core/adapter';
import type { Message } from 'amqplib';
import { Header, intHeader, stringHeaders } from './headers.js';

/**
 * Maps an AMQP delivery to core's envelope. The id is `properties.messageId` (what once's
 * publisher sets), else the `idHeader` header; the user's `idOf`, when given, overrides both.
 * `attempt` is our own `x-once-attempt` header: `x-delivery-count` misses dead-letter round
 * trips and its meaning differs between RabbitMQ versions. amqplib hands over ids already decoded
 * as UTF-8, so one holding U+FFFD is refused (`decodedIdCheck`). `redelivered` is the broker's flag:
 * the delivery was handed out before and never settled (a consumer died or lost its channel).
 */
export function envelopeOf(message: Message, queue: string, idHeader: string): Envelope {
  const raw = message.properties.headers as Record<string, unknown> | undefined;
  const headers = stringHeaders(raw);
  const messageId: unknown = message.properties.messageId;
  const id = typeof messageId === 'string' && messageId.length > 0 ? messageId : headers[idHeader];
  const envelope: Envelope = {
    id,
    body: message.content,
    headers,
    key: message.fields.routingKey,
    source: { broker: 'rabbitmq', queue, delivery: String(message.fields.deliveryTag) },
    attempt: attemptOf(message),
    redelivered: message.fields.redelivered,
  };
  // Only an id holding U+FFFD gets the field (no object to spread for every other one).
  if (id?.includes('\ufffd')) envelope.idUnusable = decodedIdCheck(id).idUnusable;
  return envelope;
}

/** A delivery's `attempt` (our `x-once-attempt` header), without making its envelope. */
export function attemptOf(message: Message): number {
  return Math.max(
    1,
    intHeader(message.properties.headers as Record<string, unknown> | undefined, Header.attempt, 1),
  );
}
