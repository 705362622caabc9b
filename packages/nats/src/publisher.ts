import { type JetStreamClient, jetstream, jetstreamManager, type PubAck } from '@nats-io/jetstream';
import { connect, type NatsConnection, headers as natsHeaders } from '@nats-io/transport-node';
import {
  ErrorCode,
  type Logger,
  OnceError,
  type OutboxMessage,
  type OutboxPublisher,
  type OutboxPublishOptions,
  type OutboxPublishResult,
} from '@once/core';
import {
  Connector,
  checkMessageId,
  optionCheck,
  settledResults,
  silentLogger,
  untilAborted,
} from '@once/core/adapter';
import { connectError, NatsErrorCode } from './errors.js';
import { ownConnectOptions } from './liveness.js';

/** Codes of failures that no retry can fix: the relay parks the row at once. */
const PERMANENT = new Set<string>([ErrorCode.InvalidId, ErrorCode.InvalidOption]);
/** JetStream's own default `duplicate_window`, in ms: assumed when the stream's cannot be read. */
const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;
/** Added to the window before a held republish goes again, in ms (timers are not exact). */
const WINDOW_MARGIN_MS = 1_000;

/** The keys of {@link NatsPublisherOptions}: `createNatsPublisher` refuses any other. */
const NATS_PUBLISHER_KEYS: Readonly<Record<keyof NatsPublisherOptions, true>> = Object.freeze({
  servers: true,
  connection: true,
  publishTimeoutMs: true,
  logger: true,
});

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
 * `duplicate_window`) counts as sent: the relay's own earlier send of the row was stored. Not for
 * a republish (`message.republish`): there the stored message is the original, already handled,
 * and the copy was dropped; the row is reported with `retryAfterMs`, the stream's
 * `duplicate_window` (read from the stream, JetStream's default of two minutes when it cannot
 * be), so the relay keeps it pending and sends it again once JetStream has forgotten the id. A
 * rejected or unanswered publish is "not known to be published": the relay leaves the row pending
 * and tries again under the same id, and the downstream inbox deduplicates a re-send that falls
 * outside the window. The message's `key` is not sent: NATS routes on the subject, `destination`.
 */
export class NatsPublisher implements OutboxPublisher {
  readonly #own: boolean;
  readonly #logger: Logger;
  readonly #link: Connector<{ nc: NatsConnection; js: JetStreamClient }>;

  constructor(options: NatsPublisherOptions) {
    optionCheck.namingFactory('createNatsPublisher', () =>
      optionCheck.knownKeys(options, NATS_PUBLISHER_KEYS),
    );
    if (typeof options !== 'object' || options === null) {
      throw new OnceError(ErrorCode.InvalidOption, 'options must be an object');
    }
    if ((options.servers === undefined) === (options.connection === undefined)) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        "option 'servers': give either servers (once connects) or connection (your own), not both or neither",
      );
    }
    const servers = typeof options.servers === 'string' ? [options.servers] : [...(options.servers ?? [])];
    const { connection } = options;
    this.#own = connection === undefined;
    const timeout = optionCheck.integer('publishTimeoutMs', options.publishTimeoutMs ?? 30_000, 1);
    this.#logger = options.logger || silentLogger;
    // Opened once: the client reconnects by itself, so a connection is never dropped.
    this.#link = new Connector(async () => {
      const nc =
        connection ??
        (await connect(ownConnectOptions(servers, 'once:publisher')).catch((err: unknown) => {
          throw connectError(err, servers);
        }));
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
  ): Promise<{
    /**
     * True when JetStream took it for a duplicate of a message it already holds (same id inside the stream's
     * duplicate window).
     */
    duplicate: boolean;
  }> {
    return { duplicate: (await this.#publishAck(message, options)).duplicate };
  }

  async #publishAck(message: OutboxMessage, options: OutboxPublishOptions): Promise<PubAck> {
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
      return await untilAborted(work, options.signal);
    } catch (err) {
      if (options.signal?.aborted) throw err;
      throw new OnceError(
        NatsErrorCode.Publish,
        `publish of ${message.id} to '${message.destination}' got no PubAck: ${(err as Error)?.message ?? String(err)}`,
        { retryable: true, cause: err },
      );
    }
  }

  /**
   * Publishes messages and reports each one's fate (core's `OutboxPublisher`). A republish that
   * JetStream takes for a duplicate is not sent: it is reported with `retryAfterMs`.
   */
  async publish(
    messages: readonly OutboxMessage[],
    options: OutboxPublishOptions = {},
  ): Promise<OutboxPublishResult[]> {
    const settled = await Promise.allSettled(messages.map((m) => this.#publishAck(m, options)));
    const republished = new Set(messages.filter((m) => m.republish !== undefined).map((m) => m.id));
    const results = settledResults(messages, settled, PERMANENT, ({ duplicate }, id) => {
      if (duplicate && !republished.has(id))
        this.#logger.debug({ id }, 'once/nats: PubAck duplicate: already stored, counted as sent');
    });
    const windows = new Map<string, Promise<{ ms: number; read: boolean }>>();
    for (let i = 0; i < messages.length; i++) {
      const r = settled[i]!;
      const message = messages[i]!;
      if (r.status !== 'fulfilled' || !r.value.duplicate || message.republish === undefined) continue;
      const stream = r.value.stream;
      let window = windows.get(stream);
      if (!window) {
        window = this.#duplicateWindow(stream, options.signal);
        windows.set(stream, window);
      }
      const { ms, read } = await window;
      this.#logger.info(
        { id: message.id, stream, duplicateWindowMs: ms },
        'once/nats: republished message taken for a duplicate inside duplicate_window; held until it has passed',
      );
      results[i] = {
        id: message.id,
        ok: false,
        retryable: true,
        retryAfterMs: ms + WINDOW_MARGIN_MS,
        error: new OnceError(
          NatsErrorCode.DuplicateWindow,
          `republished message ${message.id}: stream ${stream} still holds that Nats-Msg-Id ` +
            `(message ${r.value.seq}) inside its duplicate_window of ${ms} ms${read ? '' : ' (the stream could not be read: the default assumed)'}, ` +
            'and dropped the copy: it goes again once the window has passed',
          { retryable: true },
        ),
      };
    }
    return results;
  }

  /** The stream's `duplicate_window` in ms, or JetStream's default when it cannot be read. */
  async #duplicateWindow(
    stream: string,
    signal: AbortSignal | undefined,
  ): Promise<{ ms: number; read: boolean }> {
    try {
      const { nc } = await this.#link.get();
      const jsm = await untilAborted(jetstreamManager(nc), signal);
      const info = await untilAborted(jsm.streams.info(stream), signal);
      const ns = Number(info.config.duplicate_window ?? 0);
      return ns > 0
        ? { ms: Math.ceil(ns / 1e6), read: true }
        : { ms: DEFAULT_DUPLICATE_WINDOW_MS, read: false };
    } catch (err) {
      this.#logger.warn(
        { stream, error: (err as Error)?.message ?? String(err) },
        'once/nats: could not read the duplicate_window of the stream; assuming the default of two minutes',
      );
      return { ms: DEFAULT_DUPLICATE_WINDOW_MS, read: false };
    }
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
