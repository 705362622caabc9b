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
import { checkNumber, serializeError, untilAborted } from '@once/core/adapter';
import { connectError, NatsErrorCode } from './errors.js';

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
  readonly #servers: readonly string[];
  readonly #own: boolean;
  readonly #timeoutMs: number;
  readonly #logger: Logger;
  #nc: Promise<NatsConnection> | undefined;
  #js: JetStreamClient | undefined;
  #stopped = false;

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
    this.#servers = typeof options.servers === 'string' ? [options.servers] : [...(options.servers ?? [])];
    this.#own = options.connection === undefined;
    if (options.connection) this.#nc = Promise.resolve(options.connection);
    this.#timeoutMs = checkNumber('publishTimeoutMs', options.publishTimeoutMs ?? 30_000, 1);
    this.#logger = options.logger || silentLogger;
  }

  /** Connects now (otherwise the first publish does). Throws NATS_CONNECT when unreachable. */
  async start(): Promise<void> {
    await this.#client();
  }

  async #client(): Promise<JetStreamClient> {
    if (this.#stopped) throw new OnceError(ErrorCode.Closed, 'the NATS publisher was stopped');
    this.#nc ??= connect({
      servers: [...this.#servers],
      maxReconnectAttempts: -1,
      name: 'once:publisher',
    }).catch((err: unknown) => {
      this.#nc = undefined;
      throw connectError(err, this.#servers);
    });
    const nc = await this.#nc;
    this.#js ??= jetstream(nc, { timeout: this.#timeoutMs });
    return this.#js;
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
    if (typeof message?.id !== 'string' || message.id.length === 0) {
      throw new OnceError(ErrorCode.InvalidId, 'an outbox message needs a non-empty string id');
    }
    if (typeof message.destination !== 'string' || message.destination.length === 0) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        'message.destination must be a subject (a non-empty string)',
      );
    }
    const js = await this.#client();
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
    return settled.map((r, i) => {
      const id = messages[i]!.id;
      if (r.status === 'fulfilled') {
        if (r.value.duplicate)
          this.#logger.debug({ id }, 'once/nats: PubAck duplicate: already stored, counted as sent');
        return { id, ok: true as const };
      }
      const permanent =
        OnceError.is(r.reason) &&
        (r.reason.code === ErrorCode.InvalidId || r.reason.code === ErrorCode.InvalidOption);
      return { id, ok: false as const, error: serializeError(r.reason), retryable: !permanent };
    });
  }

  /** Closes a connection once made (yours is left open). Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const nc = await this.#nc?.catch(() => undefined);
    if (nc && this.#own) await nc.close().catch(() => {});
  }
}

/** Creates a {@link NatsPublisher}. */
export function createNatsPublisher(options: NatsPublisherOptions): NatsPublisher {
  return new NatsPublisher(options);
}
