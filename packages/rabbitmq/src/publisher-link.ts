import type { Logger } from '@once/core';
import { OnceError } from '@once/core';
import { serializeError } from '@once/core/adapter';
import { type ChannelModel, type ConfirmChannel, connect, type Options } from 'amqplib';
import { ConfirmedPublisher } from './confirmed-publish.js';
import { RabbitErrorCode } from './errors.js';
import type { SocketOptionsLike as SocketOptions } from './socket-options.js';

/** A publisher's connection, its confirm channel, and the confirmed sends on it. */
export interface Link {
  connection: ChannelModel;
  channel: ConfirmChannel;
  publisher: ConfirmedPublisher;
}

/**
 * Opens the publisher's connection and confirm channel. Every emitter gets an 'error' listener
 * (amqplib emits 'error' before 'close'; an unlistened one would crash the process); a close of
 * either calls `forget`, so the next publish opens a new link. Throws AMQP_CONNECT.
 */
export async function openLink(
  url: string | Options.Connect,
  socketOptions: SocketOptions,
  logger: Logger,
  forget: () => void,
): Promise<Link> {
  let connection: ChannelModel;
  try {
    connection = await connect(url, socketOptions);
  } catch (err) {
    throw new OnceError(
      RabbitErrorCode.Connect,
      `cannot connect to RabbitMQ: ${(err as Error)?.message ?? err}`,
      {
        retryable: true,
        cause: err,
      },
    );
  }
  const drop = (err: unknown) => {
    logger.warn(
      {
        error: serializeError(err).message,
      },
      'once/rabbitmq: publisher link lost; reconnecting on the next publish',
    );
    forget();
    connection.close().catch(() => {});
  };
  connection.on('error', (err: Error) =>
    logger.warn({ error: String(err) }, 'once/rabbitmq: publisher connection error'),
  );
  connection.on('close', (err?: Error) => drop(err ?? new Error('connection closed')));
  let channel: ConfirmChannel;
  try {
    channel = await connection.createConfirmChannel();
  } catch (err) {
    await connection.close().catch(() => {});
    throw new OnceError(RabbitErrorCode.Connect, `cannot open a channel: ${(err as Error)?.message ?? err}`, {
      retryable: true,
      cause: err,
    });
  }
  channel.on('error', (err: Error) =>
    logger.warn({ error: String(err) }, 'once/rabbitmq: publisher channel error'),
  );
  channel.on('close', () => drop(new Error('channel closed')));
  return { connection, channel, publisher: new ConfirmedPublisher(channel) };
}

/**
 * Closes a link without waiting on the broker: a stalled broker never answers `close`, so after
 * `graceMs` the socket is destroyed (amqplib then fails whatever was still unconfirmed).
 */
export function closeLink(link: Link, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const overdue = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      const stream = (link.connection as unknown as { connection?: { stream?: { destroy?(): void } } })
        .connection?.stream;
      stream?.destroy?.();
      resolve();
    }, graceMs);
  });
  link.channel.close().catch(() => {});
  const closed = link.connection.close().catch(() => {});
  return Promise.race([closed, overdue]).finally(() => clearTimeout(timer));
}
