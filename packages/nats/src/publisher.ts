import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection, headers as natsHeaders } from '@nats-io/transport-node';
import {
  ErrorCode,
  type Logger,
  OnceError,
  type OutboxMessage,
  type OutboxPublisher,
  type OutboxPublishOptions,
  type OutboxPublishResult,
  silentLogger,
} from '@once/core';
import { Connector, checkMessageId, checkNumber, settledResults, untilAborted } from '@once/core/adapter';
import { connectError, NatsErrorCode } from './errors.js';

/** Codes of failures that no retry can fix: the relay parks the row at once. */
const PERMANENT = new Set<string>([ErrorCode.InvalidId, ErrorCode.InvalidOption]);

/** Options of {@link createNatsPublisher}. */
export interface NatsPublisherOptions {
  /** Servers once connects to; it reconnects forever. Give this or `connection`. */
  servers?: string | readonly string[];
  /** A connection of your own; once never closes it. */
  connection?: NatsConnection;
  /** How long a publish waits for its PubAck, in ms. @default 30000 */
  publishTimeoutMs?: number;
  /** `(fields, message)`; `false` or none: silent. @default silent */
  logger?: Logger | false;
}

/**
 * Publishes outbox rows to JetStream with `Nats-Msg-Id` = the row's id and waits for each PubAck.
 * A PubAck with `duplicate: true` (JetStream already stored that id within the stream's
 * `duplicate_window`) counts as sent. A rejected or unanswered publish is "not known to be
 * published": the relay leaves the row pending and tries again under the same id, and the
 * downstream inbox deduplicates a re-send that falls outside the window. The message's `key` is
 * not sent: NATS routes on the subject, `destination`.
 */
export class NatsPublisher implements OutboxPublisher {
  readonly #own: boolean;
  readonly #logger: Logger;
  readonly #link: Connector<{ nc: NatsConnection; js: JetStreamClient }>;

  constructor(options: NatsPublisherOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new OnceError(ErrorCode.InvalidOption, 'options must be an object');
    }
    if ((options.servers === undefined) === (options.connection === undefined)) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        'options.servers: give either servers (once connects) or connection (your own), not both or neither',
      );
    }
    const servers = typeof options.servers === 'string' ? [options.servers] : [...(options.servers ?? [])];
    const { connection } = options;
    this.#own = connection === undefined;
    const timeout = checkNumber('publishTimeoutMs', options.publishTimeoutMs ?? 30_000, 1);
    this.#logger = options.logger || silentLogger;
    // Opened once: the client reconnects by itself, so a connection is never dropped.
    this.#link = new Connector(async () => {
      const nc =
        connection ??
        (await connect({ servers, maxReconnectAttempts: -1, name: 'once:publisher' }).catch(
          (err: unknown) => {
            throw connectError(err, servers);
          },
        ));
      return { nc, js: jetstream(nc, { timeout }) };
    }, 'the NATS publisher was stopped');
  }

  /** Connects now (otherwise the first publish does). Throws NATS_CONNECT when unreachable. */
  async start(): Promise<void> {
    await this.#link.get();
  }

  /**
   * Publishes one message and waits for its PubAck; resolves with whether JetStream took it for a
   * duplicate. Rejects with NATS_PUBLISH when no PubAck came (no stream captures the subject, a
   * timeout, a lost connection).
   */
  async publishOne(
    message: OutboxMessage,
    options: OutboxPublishOptions = {},
  ): Promise<{ duplicate: boolean }> {
    checkMessageId(message);
    if (typeof message.destination !== 'string' || message.destination.length === 0) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        'message.destination must be a subject (a non-empty string)',
      );
    }
    const { js } = await this.#link.get();
    const headers = natsHeaders();
    for (const [k, v] of Object.entries(message.headers ?? {})) headers.set(k, v);
    const work = js.publish(message.destination, message.body, { msgID: message.id, headers });
    try {
      const ack = await untilAborted(work, options.signal);
      return { duplicate: ack.duplicate };
    } catch (err) {
      if (options.signal?.aborted) throw err;
      throw new OnceError(
        NatsErrorCode.Publish,
        `publish of ${message.id} to '${message.destination}' got no PubAck: ${(err as Error)?.message ?? String(err)}`,
        { retryable: true, cause: err },
      );
    }
  }

  /** Publishes messages and reports each one's fate (core's `OutboxPublisher`). */
  async publish(
    messages: readonly OutboxMessage[],
    options: OutboxPublishOptions = {},
  ): Promise<OutboxPublishResult[]> {
    const settled = await Promise.allSettled(messages.map((m) => this.publishOne(m, options)));
    return settledResults(messages, settled, PERMANENT, ({ duplicate }, id) => {
      if (duplicate)
        this.#logger.debug({ id }, 'once/nats: PubAck duplicate: already stored, counted as sent');
    });
  }

  /** Closes a connection once made (yours is left open). Idempotent. */
  async stop(): Promise<void> {
    const link = await this.#link.stop();
    if (link && this.#own) await link.nc.close().catch(() => {});
  }
}

/** Creates a {@link NatsPublisher}. */
export function createNatsPublisher(options: NatsPublisherOptions): NatsPublisher {
  return new NatsPublisher(options);
}
