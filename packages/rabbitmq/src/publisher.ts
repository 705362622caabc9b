import { setMaxListeners } from 'node:events';
import {
  ErrorCode,
  type Logger,
  OnceError,
  type OutboxPublishOptions,
  type OutboxPublishResult,
} from '@once/core';
import {
  Connector,
  checkMessageId,
  optionCheck,
  serializeError,
  settledResults,
  silentLogger,
  untilAborted,
} from '@once/core/adapter';
import type { Options } from 'amqplib';
import { RabbitErrorCode } from './errors.js';
import { withHeartbeat } from './heartbeat.js';
import { closeLink, type Link, openLink } from './publisher-link.js';
import type { SocketOptionsLike as SocketOptions } from './socket-options.js';

/** Bytes an AMQP shortstr holds: `messageId`, routing key. */
const SHORTSTR_BYTES = 255;
/**
 * The outbox's name for RabbitMQ's default exchange, whose own name, `''`, no outbox destination
 * can have: RabbitMQ's management UI shows it as `amq.default`, a name no exchange can take.
 */
const DEFAULT_EXCHANGE_ALIAS = 'amq.default';

/** Codes of failures that no retry can fix: the relay parks the row at once. */
const PERMANENT = new Set<string>([
  ErrorCode.InvalidOption,
  ErrorCode.InvalidId,
  RabbitErrorCode.IdTooLong,
  RabbitErrorCode.KeyTooLong,
]);

/** A message to publish, as the outbox relay hands it over. */
export interface OutboxMessage {
  /** The outbox row id; becomes the AMQP `messageId`, which once consumers deduplicate on. */
  id: string;
  /**
   * The exchange to publish to. `''` or `'amq.default'` (the outbox's name for it) is the default
   * exchange, where `key` names the queue.
   */
  destination: string;
  /** The message body, sent as it is (a string as UTF-8). */
  body: Buffer | string;
  /** The routing key. @default '' */
  key?: string | undefined;
  /** AMQP headers to send with it; the id travels as the AMQP `messageId` property, not a header. */
  headers?: Readonly<Record<string, string>> | undefined;
  /** @default 'application/json' for string bodies, none for Buffers */
  contentType?: string | undefined;
}

/** The keys of {@link RabbitPublisherOptions}: `createRabbitPublisher` refuses any other. */
const RABBIT_PUBLISHER_KEYS: Readonly<Record<keyof RabbitPublisherOptions, true>> = Object.freeze({
  url: true,
  socketOptions: true,
  confirmTimeoutMs: true,
  logger: true,
});

/** Options of {@link createRabbitPublisher}. */
export interface RabbitPublisherOptions {
  /** AMQP URL or amqplib connect options. */
  url: string | Options.Connect;
  /**
   * amqplib socket options. `clientProperties.connection_name` defaults to `once:publisher`, and
   * `timeout` (the connect and handshake deadline, in ms) to `confirmTimeoutMs`.
   */
  socketOptions?: SocketOptions;
  /**
   * How long a publish waits for the broker's confirm, in ms. When it passes, the channel is
   * closed and the publish rejects with AMQP_CONFIRM_TIMEOUT (the message may still have landed:
   * a re-send carries the same id). The outbox relay's `publishTimeoutMs` aborts sooner if lower.
   * @default 30000
   */
  confirmTimeoutMs?: number;
  /** `(fields, message)`; `false` or none: silent. @default silent */
  logger?: Logger | false;
}

/**
 * Publishes outbox rows to RabbitMQ and resolves only when the broker has taken responsibility:
 * a confirm channel, `mandatory` with returns handled as failures (RabbitMQ confirms a message it
 * could not route), persistent delivery, and `messageId` = the outbox id. A rejected promise
 * means "not known to be published": the relay leaves the row pending and tries again, and the
 * downstream inbox deduplicates a re-send. A lost connection is reopened on the next publish.
 */
export class RabbitPublisher {
  readonly #logger: Logger;
  readonly #confirmTimeoutMs: number;
  readonly #link: Connector<Link>;

  constructor(options: RabbitPublisherOptions) {
    optionCheck.namingFactory('createRabbitPublisher', () =>
      optionCheck.knownKeys(options, RABBIT_PUBLISHER_KEYS),
    );
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
        `option 'url' must be an amqp:// or amqps:// URL or amqplib connect options, got ${JSON.stringify(url)}`,
      );
    }
    this.#confirmTimeoutMs = optionCheck.integer('confirmTimeoutMs', options.confirmTimeoutMs ?? 30_000, 1);
    const so = options.socketOptions ?? {};
    const socketOptions: SocketOptions = {
      // amqplib's handshake deadline: a broker that accepts the socket and says nothing would
      // otherwise keep a connect (and the socket) pending forever.
      timeout: this.#confirmTimeoutMs,
      ...so,
      clientProperties: { connection_name: 'once:publisher', ...so.clientProperties },
    };
    this.#logger = options.logger || silentLogger;
    this.#link = new Connector(
      (lost) => openLink(withHeartbeat(options.url), socketOptions, this.#logger, lost),
      'the publisher is stopped',
    );
  }

  /** Connects now (otherwise the first publish does). Throws AMQP_CONNECT when the broker is unreachable. */
  async start(): Promise<void> {
    await this.#link.get();
  }

  /**
   * Publishes one message; resolves once confirmed and routed. Rejects with AMQP_UNROUTABLE when
   * the broker returned it, AMQP_NACKED, AMQP_CHANNEL_CLOSED, AMQP_ID_TOO_LONG or
   * AMQP_KEY_TOO_LONG for an id or key AMQP cannot carry, AMQP_CONFIRM_TIMEOUT when no confirm
   * came within `confirmTimeoutMs`, and with the reason of `options.signal` once it is aborted.
   */
  async publishOne(message: OutboxMessage, options: OutboxPublishOptions = {}): Promise<void> {
    return this.#bounded(options.signal, (signal) => this.#publishOne(message, signal));
  }

  /**
   * Publishes messages in order on one confirm channel and reports each one's fate, so the outbox
   * relay (core's `OutboxPublisher`) marks sent exactly the rows the broker confirmed and routed.
   * An aborted `signal` (the relay's deadline) or `confirmTimeoutMs` ends the wait: the channel is
   * closed, so nothing confirmed after that is reported sent.
   */
  async publish(
    messages: readonly OutboxMessage[],
    options: OutboxPublishOptions = {},
  ): Promise<OutboxPublishResult[]> {
    const settled = await this.#bounded(options.signal, (signal) =>
      Promise.allSettled(messages.map((m) => this.#publishOne(m, signal))),
    );
    return settledResults(messages, settled, PERMANENT);
  }

  async #publishOne(message: OutboxMessage, signal: AbortSignal): Promise<void> {
    checkMessageId(message);
    if (typeof message.destination !== 'string') {
      throw new OnceError(ErrorCode.InvalidOption, 'message.destination must be an exchange name (a string)');
    }
    // amqplib would throw a TypeError at encode time, which looks like a broken channel and is
    // retried forever; the id is the message's identity, so it is never shortened either.
    const idBytes = Buffer.byteLength(message.id, 'utf8');
    if (idBytes > SHORTSTR_BYTES) {
      throw new OnceError(
        RabbitErrorCode.IdTooLong,
        `message id of ${idBytes} bytes does not fit an AMQP message-id (at most ${SHORTSTR_BYTES} bytes of UTF-8): ` +
          'publish it to a broker that carries it (Kafka, SQS) or give it a shorter id',
      );
    }
    const routingKey = message.key ?? '';
    const keyBytes = Buffer.byteLength(routingKey, 'utf8');
    if (keyBytes > SHORTSTR_BYTES) {
      throw new OnceError(
        RabbitErrorCode.KeyTooLong,
        `routing key of ${keyBytes} bytes for message ${message.id} exceeds AMQP's ${SHORTSTR_BYTES} bytes`,
      );
    }
    const opening = this.#link.get();
    // Connecting is bounded too: a broker that accepts the socket and then says nothing would
    // otherwise hold the publish past its deadline.
    const link = await untilAborted(opening, signal);
    const body = typeof message.body === 'string' ? Buffer.from(message.body) : message.body;
    const contentType =
      message.contentType ?? (typeof message.body === 'string' ? 'application/json' : undefined);
    const onAbort = () => this.#abandon(opening, link, signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await link.publisher.publish(
        message.destination === DEFAULT_EXCHANGE_ALIAS ? '' : message.destination,
        routingKey,
        body,
        {
          messageId: message.id,
          persistent: true,
          ...(contentType ? { contentType } : {}),
          headers: { ...message.headers },
        },
        signal,
      );
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Runs `fn` with a signal aborted by the caller's or after `confirmTimeoutMs`, whichever comes first. */
  async #bounded<T>(outer: AbortSignal | undefined, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    // A batch waits on this signal up to three times per message (the connect, the abandon hook,
    // the confirm), each listener removed when its message settles: a batch of 100 is 300
    // listeners by design, not the leak Node's default limit of 10 warns about.
    setMaxListeners(0, controller.signal);
    const abort = () =>
      controller.abort(
        outer?.reason ??
          new OnceError(
            RabbitErrorCode.ConfirmTimeout,
            'the publish was aborted before the broker confirmed it',
            {
              retryable: true,
            },
          ),
      );
    if (outer?.aborted) abort();
    outer?.addEventListener('abort', abort, { once: true });
    const timer = setTimeout(
      () =>
        controller.abort(
          new OnceError(
            RabbitErrorCode.ConfirmTimeout,
            `no confirm from the broker within confirmTimeoutMs (${this.#confirmTimeoutMs} ms); the channel was closed`,
            { retryable: true },
          ),
        ),
      this.#confirmTimeoutMs,
    );
    try {
      return await fn(controller.signal);
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener('abort', abort);
    }
  }

  /**
   * Gives up on a link whose confirms are overdue: the next publish opens a fresh one, and the
   * old channel is closed so that no confirm arriving late can be mistaken for a new one's.
   */
  #abandon(opening: Promise<Link>, link: Link, reason: unknown): void {
    if (!this.#link.drop(opening)) return;
    this.#logger.warn(
      {
        error: serializeError(reason).message,
      },
      'once/rabbitmq: publish aborted before the confirm; closing the channel',
    );
    void closeLink(link, this.#confirmTimeoutMs);
  }

  /** Closes the channel and connection; confirms still owed get up to `confirmTimeoutMs`. Idempotent. */
  async stop(): Promise<void> {
    const l = await this.#link.stop();
    if (!l) return;
    // Confirms still owed get confirmTimeoutMs, no more: a stalled broker must not hang stop().
    let timer: NodeJS.Timeout | undefined;
    const overdue = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.#confirmTimeoutMs);
    });
    await Promise.race([l.channel.waitForConfirms().catch(() => {}), overdue]);
    clearTimeout(timer);
    await closeLink(l, this.#confirmTimeoutMs);
  }

  /** Stops the publisher as `stop()` does, for `await using publisher = ...`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** Creates a {@link RabbitPublisher}; call `start()` or just `publish()`. */
export function createRabbitPublisher(options: RabbitPublisherOptions): RabbitPublisher {
  return new RabbitPublisher(options);
}
