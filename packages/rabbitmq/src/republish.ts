import type { Message, Options } from 'amqplib';

// Broker-written headers that should not be copied onto a message we publish ourselves.
const BROKER_HEADERS = [
  'x-death',
  'x-first-death-exchange',
  'x-first-death-queue',
  'x-first-death-reason',
  'x-delivery-count',
];

/**
 * Properties for a copy of a delivered message (to a retry tier, the quarantine queue or the
 * dead-letter exchange): the producer's properties and headers, persistent, plus `extra` headers.
 * `userId` is dropped (the broker refuses one that is not the publishing user) and so is a
 * per-message `expiration`.
 */
export function republishOptions(message: Message, extra: Record<string, unknown>): Options.Publish {
  const p = message.properties;
  const headers: Record<string, unknown> = { ...(p.headers as Record<string, unknown> | undefined) };
  for (const h of BROKER_HEADERS) delete headers[h];
  const out: Options.Publish = { persistent: true, headers: { ...headers, ...extra } };
  if (p.contentType !== undefined) out.contentType = p.contentType;
  if (p.contentEncoding !== undefined) out.contentEncoding = p.contentEncoding;
  if (p.correlationId !== undefined) out.correlationId = p.correlationId;
  if (p.replyTo !== undefined) out.replyTo = p.replyTo;
  if (p.messageId !== undefined) out.messageId = p.messageId;
  if (p.timestamp !== undefined) out.timestamp = p.timestamp;
  if (p.type !== undefined) out.type = p.type;
  if (p.appId !== undefined) out.appId = p.appId;
  if (p.priority !== undefined) out.priority = p.priority;
  return out;
}
