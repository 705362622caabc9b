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
 *
 * A confirm may never come (a stalled broker, a half-open connection): pass a `signal` to bound
 * the wait. Its abort rejects the publish with the signal's reason and forgets it, so a confirm
 * arriving later resolves nothing; the caller should then close the channel, since the message
 * may still land.
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

  /**
   * Rejects with AMQP_UNROUTABLE (returned), AMQP_NACKED, AMQP_CHANNEL_CLOSED, or the reason of
   * `signal` once it is aborted before the confirm came.
   */
  publish(
    exchange: string,
    routingKey: string,
    body: Buffer,
    options: Options.Publish = {},
    signal?: AbortSignal,
  ): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
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
      const onAbort = () => {
        // The broker may still confirm (or return) it: `pending` stays matched to its publish
        // until then, but the caller has its answer.
        reject(abortReason(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        this.#channel.publish(exchange, routingKey, body, { ...options, mandatory: true }, (err) => {
          signal?.removeEventListener('abort', onAbort);
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
        signal?.removeEventListener('abort', onAbort);
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

function abortReason(signal: AbortSignal): unknown {
  return (
    signal.reason ??
    new OnceError(RabbitErrorCode.ChannelClosed, 'the publish was aborted before the broker confirmed it', {
      retryable: true,
    })
  );
}
