import { OnceError } from '@once/core';
import type { ConfirmChannel, Message, Options } from 'amqplib';
import { RabbitErrorCode } from './errors.js';

interface Pending {
  exchange: string;
  routingKey: string;
  messageId: unknown;
  content: Buffer;
  returned: boolean;
}

/**
 * Publishes on a confirm channel and resolves only once the broker has confirmed the message,
 * with `mandatory` set and returns handled: RabbitMQ *acks* a message it could not route (after
 * sending it back in a `basic.return`), so a bare confirm does not mean it reached a queue.
 *
 * A return carries no publish sequence number, so it is matched to the oldest unconfirmed
 * publish with the same exchange, routing key, message id and body: the broker sends returns
 * and confirms in publish order on a channel, and two identical messages to one route are
 * routed alike (both returned or neither). Nothing is added to the message.
 */
export class ConfirmedPublisher {
  readonly #channel: ConfirmChannel;
  readonly #pending: Pending[] = [];
  #closed = false;

  constructor(channel: ConfirmChannel) {
    this.#channel = channel;
    channel.on('return', (message: Message) => {
      const match = this.#pending.find(
        (p) =>
          !p.returned &&
          p.exchange === message.fields.exchange &&
          p.routingKey === message.fields.routingKey &&
          p.messageId === message.properties.messageId &&
          p.content.equals(message.content),
      );
      if (match) match.returned = true;
    });
    channel.on('close', () => {
      this.#closed = true;
    });
  }

  /** Rejects with AMQP_UNROUTABLE (returned), AMQP_NACKED, or AMQP_CHANNEL_CLOSED. */
  publish(exchange: string, routingKey: string, body: Buffer, options: Options.Publish = {}): Promise<void> {
    if (this.#closed) {
      return Promise.reject(
        new OnceError(RabbitErrorCode.ChannelClosed, 'the channel is closed', { retryable: true }),
      );
    }
    const pending: Pending = {
      exchange,
      routingKey,
      messageId: options.messageId,
      content: body,
      returned: false,
    };
    return new Promise<void>((resolve, reject) => {
      try {
        this.#channel.publish(exchange, routingKey, body, { ...options, mandatory: true }, (err) => {
          const i = this.#pending.indexOf(pending);
          if (i >= 0) this.#pending.splice(i, 1);
          if (pending.returned) {
            const route = `exchange '${exchange}' with routing key '${routingKey}'`;
            reject(
              new OnceError(
                RabbitErrorCode.Unroutable,
                `no queue is bound for ${route}: the broker returned the message`,
              ),
            );
          } else if (err) {
            const closed = this.#closed || /closed/i.test(String((err as Error)?.message ?? err));
            reject(
              closed
                ? new OnceError(
                    RabbitErrorCode.ChannelClosed,
                    'the channel closed before the broker confirmed the message',
                    {
                      retryable: true,
                      cause: err,
                    },
                  )
                : new OnceError(RabbitErrorCode.Nacked, 'the broker nacked the message', {
                    retryable: true,
                    cause: err,
                  }),
            );
          } else {
            resolve();
          }
        });
        this.#pending.push(pending);
      } catch (err) {
        // amqplib throws synchronously on a closed channel (IllegalOperationError) or oversize headers.
        reject(
          new OnceError(RabbitErrorCode.ChannelClosed, `publish failed: ${(err as Error)?.message ?? err}`, {
            retryable: true,
            cause: err,
          }),
        );
      }
    });
  }
}
