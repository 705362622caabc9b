import type { Envelope } from '@once/core';
import type { Message } from 'amqplib';
import { Header, intHeader, stringHeaders } from './headers.js';

/**
 * Maps an AMQP delivery to core's envelope. The id is `properties.messageId` (what once's
 * publisher sets), else the `idHeader` header; the user's `idOf`, when given, overrides both.
 * `attempt` is our own `x-once-attempt` header: `x-delivery-count` misses dead-letter round
 * trips and its meaning differs between RabbitMQ versions. `redelivered` is the broker's flag:
 * the delivery was handed out before and never settled (a consumer died or lost its channel).
 */
export function envelopeOf(message: Message, queue: string, idHeader: string): Envelope {
  const raw = message.properties.headers as Record<string, unknown> | undefined;
  const headers = stringHeaders(raw);
  const messageId: unknown = message.properties.messageId;
  const id = typeof messageId === 'string' && messageId.length > 0 ? messageId : headers[idHeader];
  return {
    id,
    // amqplib hands us text it has already decoded, turning each invalid UTF-8 sequence into
    // U+FFFD: two different byte ids would arrive as one. Such an id is refused, not guessed at.
    ...(id?.includes('\ufffd')
      ? {
          idUnusable:
            'it holds U+FFFD: its bytes were not valid UTF-8 (publish ids as UTF-8 text, or pass idOf)',
        }
      : {}),
    body: message.content,
    headers,
    key: message.fields.routingKey,
    source: { broker: 'rabbitmq', queue },
    attempt: Math.max(1, intHeader(raw, Header.attempt, 1)),
    redelivered: message.fields.redelivered,
  };
}
