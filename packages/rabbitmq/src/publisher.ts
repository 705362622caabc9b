import {
  ErrorCode,
  type Logger,
  OnceError,
  type OutboxPublishResult,
  serializeError,
  silentLogger,
} from '@once/core';
import { type ChannelModel, type ConfirmChannel, connect, type Options, type SocketOptions } from 'amqplib';
import { ConfirmedPublisher } from './confirmed-publish.js';
import { RabbitErrorCode } from './errors.js';

/** A message to publish, as the outbox relay hands it over. */
export interface OutboxMessage {
  /** The outbox row id; becomes the AMQP `messageId`, which once consumers deduplicate on. */
  id: string;
  /** The exchange to publish to (`''` is the default exchange, where `key` names the queue). */
  destination: string;
  body: Buffer | string;
  /** The routing key. @default '' */
  key?: string | undefined;
  headers?: Readonly<Record<string, string>> | undefined;
  /** @default 'application/json' for string bodies, none for Buffers */
  contentType?: string | undefined;
}

/** Options of {@link createRabbitPublisher}. */
export interface RabbitPublisherOptions {
  /** AMQP URL or amqplib connect options. */
  url: string | Options.Connect;
  /** amqplib socket options. `clientProperties.connection_name` defaults to `once:publisher`. */
  socketOptions?: SocketOptions;
  /** @default silent */
  logger?: Logger;
}

/**
 * Publishes outbox rows to RabbitMQ and resolves only when the broker has taken responsibility:
 * a confirm channel, `mandatory` with returns handled as failures (RabbitMQ confirms a message it
 * could not route), persistent delivery, and `messageId` = the outbox id. A rejected promise
 * means "not known to be published": the relay leaves the row pending and tries again, and the
 * downstream inbox deduplicates a re-send. A lost connection is reopened on the next publish.
 */
export class RabbitPublisher {
  readonly #url: string | Options.Connect;
  readonly #socketOptions: SocketOptions;
  readonly #logger: Logger;
  #link:
    | Promise<{ connection: ChannelModel; channel: ConfirmChannel; publisher: ConfirmedPublisher }>
    | undefined;
  #stopped = false;

  constructor(options: RabbitPublisherOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new OnceError(ErrorCode.InvalidOption, 'options must be an object');
    }
    const url = options.url as unknown;
    if (
      !(typeof url === 'string' && /^amqps?:\/\//.test(url)) &&
      !(typeof url === 'object' && url !== null)
    ) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        `options.url must be an amqp:// or amqps:// URL or amqplib connect options, got ${JSON.stringify(url)}`,
      );
    }
    this.#url = options.url;
    const so = options.socketOptions ?? {};
    this.#socketOptions = {
      ...so,
      clientProperties: { connection_name: 'once:publisher', ...so.clientProperties },
    };
    this.#logger = options.logger ?? silentLogger;
  }

  /** Connects now (otherwise the first publish does). Throws AMQP_CONNECT when the broker is unreachable. */
  async start(): Promise<void> {
    await this.#ensure();
  }

  /** Publishes one message; resolves once confirmed and routed. See {@link ConfirmedPublisher.publish} for errors. */
  async publishOne(message: OutboxMessage): Promise<void> {
    if (typeof message?.id !== 'string' || message.id.length === 0) {
      throw new OnceError(ErrorCode.InvalidId, 'an outbox message needs a non-empty string id');
    }
    if (typeof message.destination !== 'string') {
      throw new OnceError(ErrorCode.InvalidOption, 'message.destination must be an exchange name (a string)');
    }
    const { publisher } = await this.#ensure();
    const body = typeof message.body === 'string' ? Buffer.from(message.body) : message.body;
    const contentType =
      message.contentType ?? (typeof message.body === 'string' ? 'application/json' : undefined);
    await publisher.publish(message.destination, message.key ?? '', body, {
      messageId: message.id,
      persistent: true,
      ...(contentType ? { contentType } : {}),
      headers: { ...message.headers },
    });
  }

  /**
   * Publishes messages in order on one confirm channel and reports each one's fate, so the outbox
   * relay (core's `OutboxPublisher`) marks sent exactly the rows the broker confirmed and routed.
   */
  async publish(messages: readonly OutboxMessage[]): Promise<OutboxPublishResult[]> {
    const settled = await Promise.allSettled(messages.map((m) => this.publishOne(m)));
    return settled.map((r, i) =>
      r.status === 'fulfilled'
        ? { id: messages[i]!.id, ok: true as const }
        : {
            id: messages[i]!.id,
            ok: false as const,
            error: serializeError(r.reason),
            retryable: !(OnceError.is(r.reason) && r.reason.code === ErrorCode.InvalidOption),
          },
    );
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    const link = this.#link;
    this.#link = undefined;
    const l = await link?.catch(() => undefined);
    await l?.channel.waitForConfirms().catch(() => {});
    await l?.connection.close().catch(() => {});
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  #ensure() {
    if (this.#stopped) {
      return Promise.reject(new OnceError(RabbitErrorCode.NotRunning, 'the publisher is stopped'));
    }
    if (!this.#link) {
      const link = this.#open(() => {
        if (this.#link === link) this.#link = undefined;
      });
      this.#link = link;
      link.catch(() => {
        if (this.#link === link) this.#link = undefined;
      });
    }
    return this.#link;
  }

  async #open(forget: () => void) {
    let connection: ChannelModel;
    try {
      connection = await connect(this.#url, this.#socketOptions);
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
      this.#logger.warn('once/rabbitmq: publisher link lost; reconnecting on the next publish', {
        error: serializeError(err).message,
      });
      forget();
      connection.close().catch(() => {});
    };
    connection.on('error', (err: Error) =>
      this.#logger.warn('once/rabbitmq: publisher connection error', { error: String(err) }),
    );
    connection.on('close', (err?: Error) => drop(err ?? new Error('connection closed')));
    let channel: ConfirmChannel;
    try {
      channel = await connection.createConfirmChannel();
    } catch (err) {
      await connection.close().catch(() => {});
      throw new OnceError(
        RabbitErrorCode.Connect,
        `cannot open a channel: ${(err as Error)?.message ?? err}`,
        {
          retryable: true,
          cause: err,
        },
      );
    }
    channel.on('error', (err: Error) =>
      this.#logger.warn('once/rabbitmq: publisher channel error', { error: String(err) }),
    );
    channel.on('close', () => drop(new Error('channel closed')));
    return { connection, channel, publisher: new ConfirmedPublisher(channel) };
  }
}

/** Creates a {@link RabbitPublisher}; call `start()` or just `publish()`. */
export function createRabbitPublisher(options: RabbitPublisherOptions): RabbitPublisher {
  return new RabbitPublisher(options);
}
