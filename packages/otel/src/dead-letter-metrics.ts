import type { Attributes } from '@opentelemetry/api';
import { Attr, destinationOf } from './attributes.js';
import type { EventInstruments } from './instruments.js';
import type { KafkaConsumerLike, NatsConsumerLike, RabbitConsumerLike, SqsConsumerLike } from './targets.js';

/**
 * Feeds `once.dead_letters` from each adapter's own event: the outcome says a message is to be
 * dead-lettered, the adapter's event says it was (the send can fail and be retried, and each
 * adapter has its own policy). Each function returns the one that unsubscribes.
 */
export function subscribeKafkaDeadLetters(c: KafkaConsumerLike, m: EventInstruments): () => void {
  const base: Attributes = { [Attr.consumer]: c.inbox.consumer, [Attr.system]: 'kafka' };
  return c.on('message:dead-lettered', (e) => {
    m.deadLetters.add(1, {
      ...base,
      [Attr.destination]: e.source.queue,
      [Attr.deadLetterReason]: e.reason,
      // With dead-lettering off the message is dropped with a log line.
      [Attr.deadLetterTarget]: e.deadLetter === undefined ? 'discard' : 'topic',
    });
  });
}

export function subscribeSqsDeadLetters(c: SqsConsumerLike, m: EventInstruments): () => void {
  const base: Attributes = {
    [Attr.consumer]: c.inbox.consumer,
    [Attr.system]: 'aws_sqs',
    [Attr.destination]: destinationOf('sqs', c.options.queueUrl),
  };
  return c.on('message:dead-lettered', (e) => {
    // A URL is a queue once copied it to; an ARN (or 'redrive') is the queue's redrive policy.
    const target =
      e.deadLetter === undefined ? 'discard' : /^https?:/.test(e.deadLetter) ? 'queue' : 'redrive';
    m.deadLetters.add(1, { ...base, [Attr.deadLetterReason]: e.reason, [Attr.deadLetterTarget]: target });
  });
}

export function subscribeNatsDeadLetters(c: NatsConsumerLike, m: EventInstruments): () => void {
  const base: Attributes = {
    [Attr.consumer]: c.inbox.consumer,
    [Attr.system]: 'nats',
    [Attr.destination]: c.options.subject,
  };
  return c.on('message:dead-lettered', (e) => {
    const target = e.deadLetter === undefined ? 'discard' : 'subject';
    m.deadLetters.add(1, { ...base, [Attr.deadLetterReason]: e.reason, [Attr.deadLetterTarget]: target });
  });
}

export function subscribeRabbitDeadLetters(c: RabbitConsumerLike, m: EventInstruments): () => void {
  const base: Attributes = {
    [Attr.consumer]: c.inbox.consumer,
    [Attr.system]: 'rabbitmq',
    [Attr.destination]: c.options.queue,
  };
  return c.on('message:dead-lettered', (e) => {
    // The reason as on every broker (max-attempts, permanent, invalid-id, conflict, ...).
    const target = e.deadLetter === undefined ? 'discard' : 'exchange';
    m.deadLetters.add(1, { ...base, [Attr.deadLetterReason]: e.reason, [Attr.deadLetterTarget]: target });
  });
}
