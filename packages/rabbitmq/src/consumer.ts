import {
  createInbox,
  ErrorCode,
  type Handler,
  type Inbox,
  OnceError,
  PermanentError,
  type SerializedError,
  serializeError,
} from '@once/core';
import { type ChannelModel, type ConfirmChannel, connect } from 'amqplib';
import { ChannelConsumer, type ChannelConsumerContext } from './channel-consumer.js';
import { RabbitErrorCode, setupError } from './errors.js';
import { type RabbitEventListener, type RabbitEventName, RabbitEvents } from './events.js';
import { Header } from './headers.js';
import {
  idOfWithFallback,
  type RabbitConsumerOptions,
  type ResolvedRabbitOptions,
  resolveRabbitOptions,
} from './options.js';
import { declareTopology, type Topology, topologyOf } from './topology.js';

/** Lifecycle states of a {@link RabbitConsumer}. */
export type ConsumerState = 'idle' | 'starting' | 'running' | 'reconnecting' | 'stopping' | 'stopped';

/** A snapshot for health checks. `healthy` is true only while connected and consuming. */
export interface ConsumerHealth {
  healthy: boolean;
  state: ConsumerState;
  /** Successful reconnects since start. */
  reconnects: number;
  /** The last connection-level error, if any. */
  lastError: SerializedError | undefined;
  /** Deliveries received and not yet acked to the broker, per channel. */
  unsettled: { work: number; quarantine: number };
  /** Handlers (or batches) running now. */
  active: number;
}

interface Session {
  connection: ChannelModel;
  work: ChannelConsumer<unknown>;
  quarantine: ChannelConsumer<unknown>;
  lost: boolean;
}

/**
 * Consumes a RabbitMQ queue effectively once. Each delivery's id is claimed in the same Postgres
 * transaction as the handler's writes, and the delivery is acked only after COMMIT, in delivery
 * order through one watermark per channel. On connection or channel loss it backs off,
 * reconnects, re-declares the topology it owns and consumes again; deliveries of the lost channel
 * come back from the broker and the inbox turns them into duplicates.
 *
 * Reconnection is our own rather than amqp-connection-manager's or amqplib 2.x's `recovery`: both
 * reconnect the connection, but acks must be tied to the exact channel a delivery came on (an old
 * tag acked on a new channel is a 406 that closes it: amqp-connection-manager#297), channel-level
 * closes need the same recovery as connection loss, and the topology and consumers are ours to
 * re-create anyway. The loop is ~60 lines here.
 */
export class RabbitConsumer<R = unknown> {
  /** The inbox doing the once-only work; subscribe to its `message:*` events here. */
  readonly inbox: Inbox<R>;
  readonly options: ResolvedRabbitOptions;
  readonly #topology: Topology;
  readonly #events: RabbitEvents;
  #state: ConsumerState = 'idle';
  #session: Session | undefined;
  #timer: NodeJS.Timeout | undefined;
  #attempt = 0;
  #reconnects = 0;
  #lastError: SerializedError | undefined;
  #opening: Promise<unknown> | undefined;

  constructor(options: RabbitConsumerOptions<R>) {
    const { rabbit, inbox } = resolveRabbitOptions(options);
    this.options = rabbit;
    this.#topology = topologyOf(rabbit);
    this.#events = new RabbitEvents(rabbit.logger);
    const userHandler = inbox.handler;
    if (typeof userHandler !== 'function') {
      throw new OnceError(ErrorCode.InvalidOption, 'options.handler must be a function');
    }
    const maxRedeliveries = rabbit.maxRedeliveries;
    // The poison guard runs after the claim, so a message that already committed is a duplicate
    // and never reaches it; only a message that keeps dying unsettled is dead-lettered unrun.
    const handler: Handler<R> = (envelope, ctx) => {
      const n = Number(envelope.headers[Header.redeliveries] ?? 0);
      if (n > maxRedeliveries) {
        throw new PermanentError(
          `redelivered ${n} times without settling (maxRedeliveries ${maxRedeliveries}): its consumer kept dying ` +
            'or losing its channel while it ran; dead-lettered without running it again',
        );
      }
      return userHandler(envelope, ctx);
    };
    const idOf = idOfWithFallback(inbox.idOf);
    this.inbox = createInbox<R>({ ...inbox, handler, ...(idOf ? { idOf } : {}) });
  }

  /** Subscribe to a consumer event; returns an unsubscribe function. */
  on<E extends RabbitEventName>(name: E, listener: RabbitEventListener<E>): () => void {
    return this.#events.on(name, listener);
  }

  get state(): ConsumerState {
    return this.#state;
  }

  /**
   * Checks the inbox schema, connects, declares the topology and starts consuming. Throws a
   * named error when that first attempt fails (AMQP_CONNECT, AMQP_QUEUE_NOT_FOUND,
   * AMQP_TOPOLOGY, SCHEMA_NOT_INSTALLED); after it, faults are recovered by reconnecting.
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle') {
      throw new OnceError(
        RabbitErrorCode.NotRunning,
        `start() called in state '${this.#state}'; a consumer starts once`,
      );
    }
    this.#state = 'starting';
    try {
      await this.inbox.ready();
      this.#session = await this.#open();
      this.#state = 'running';
      this.#events.emit('connected', { reconnects: 0 });
    } catch (err) {
      this.#state = 'stopped';
      throw err;
    }
  }

  /**
   * Graceful stop: cancels the consumers, lets buffered and running messages finish (up to
   * `stopTimeoutMs`), sends their acks, closes the connection. Idempotent.
   */
  async stop(): Promise<void> {
    if (this.#state === 'stopped' || this.#state === 'idle') {
      this.#state = 'stopped';
      return;
    }
    if (this.#state === 'stopping') return;
    this.#state = 'stopping';
    clearTimeout(this.#timer);
    await this.#opening?.catch(() => {});
    const s = this.#session;
    if (s && !s.lost) {
      await Promise.all([s.work.cancel(), s.quarantine.cancel()]);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([s.work.drained(), s.quarantine.drained()]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, this.options.stopTimeoutMs);
        }),
      ]);
      clearTimeout(timer);
      s.lost = true;
      await Promise.all([s.work.close(), s.quarantine.close()]);
      await s.connection.close().catch(() => {});
    }
    this.#session = undefined;
    this.#state = 'stopped';
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  health(): ConsumerHealth {
    const s = this.#session;
    const live = s && !s.lost ? s : undefined;
    return {
      healthy: this.#state === 'running' && live !== undefined && this.inbox.available,
      state: this.#state,
      reconnects: this.#reconnects,
      lastError: this.#lastError && { name: this.#lastError.name, message: this.#lastError.message },
      unsettled: { work: live?.work.unsettled ?? 0, quarantine: live?.quarantine.unsettled ?? 0 },
      active: (live?.work.active ?? 0) + (live?.quarantine.active ?? 0),
    };
  }

  async #open(): Promise<Session> {
    const p = this.#openUnguarded();
    this.#opening = p;
    try {
      return await p;
    } finally {
      this.#opening = undefined;
    }
  }

  async #openUnguarded(): Promise<Session> {
    let connection: ChannelModel;
    try {
      connection = await connect(this.options.url, this.options.socketOptions);
    } catch (err) {
      throw setupError(err, this.options.queue);
    }
    // From here on every emitter has an 'error' listener: amqplib emits 'error' before 'close',
    // and an unlistened 'error' would crash the process (docs/pitfalls.md R3).
    const session: Partial<Session> & { lost: boolean } = { connection, lost: false };
    const lose = (err: unknown) => this.#lose(session as Session, err);
    connection.on('error', (err: Error) => this.#noteError(err, 'connection'));
    connection.on('close', (err?: Error) => lose(err ?? new Error('connection closed')));
    connection.on('blocked', (reason: string) =>
      this.options.logger.warn('once/rabbitmq: connection blocked by the broker', { reason }),
    );
    try {
      const setup = await this.#channel(connection, lose);
      await declareTopology(setup, this.options, this.#topology);
      const ctx: ChannelConsumerContext<R> = {
        inbox: this.inbox,
        options: this.options,
        topology: this.#topology,
        events: this.#events,
        consumer: this.inbox.consumer,
        onLost: lose,
      };
      session.work = new ChannelConsumer(setup, 'work', ctx) as ChannelConsumer<unknown>;
      session.quarantine = new ChannelConsumer(
        await this.#channel(connection, lose),
        'quarantine',
        ctx,
      ) as ChannelConsumer<unknown>;
      await session.quarantine.start();
      await session.work.start();
    } catch (err) {
      session.lost = true;
      await connection.close().catch(() => {});
      throw setupError(err, this.options.queue);
    }
    if (session.lost)
      throw new OnceError(RabbitErrorCode.Connect, 'the connection closed during setup', { retryable: true });
    return session as Session;
  }

  async #channel(connection: ChannelModel, lose: (err: unknown) => void): Promise<ConfirmChannel> {
    const ch = await connection.createConfirmChannel();
    ch.on('error', (err: Error) => this.#noteError(err, 'channel'));
    ch.on('close', () =>
      lose(new Error('channel closed (the connection was lost, or the broker closed the channel)')),
    );
    return ch;
  }

  #noteError(err: unknown, context: string): void {
    this.#lastError = serializeError(err);
    this.options.logger.warn(`once/rabbitmq: ${context} error`, { error: String(err) });
    this.#events.emit('error', { error: this.#lastError, context });
  }

  /** The session is gone (connection or one of its channels): drop its tags, reconnect. */
  #lose(session: Session, err: unknown): void {
    if (session.lost) return;
    session.lost = true;
    session.work?.lose();
    session.quarantine?.lose();
    // A channel-level close leaves the connection up: close it so both channels start over.
    session.connection.close().catch(() => {});
    if (this.#session !== session || this.#state === 'stopping' || this.#state === 'stopped') return;
    this.#session = undefined;
    this.#state = 'reconnecting';
    const error = serializeError(err);
    this.#lastError = error;
    this.#events.emit('disconnected', { error });
    this.#attempt = 0;
    this.#schedule(error);
  }

  #schedule(error: SerializedError): void {
    const attempt = ++this.#attempt;
    let delayMs: number;
    try {
      delayMs = Math.max(0, this.options.reconnectDelayMs(attempt));
    } catch {
      delayMs = 1_000;
    }
    this.#events.emit('reconnect-scheduled', { attempt, delayMs, error });
    this.#timer = setTimeout(() => void this.#reconnect(), delayMs);
  }

  async #reconnect(): Promise<void> {
    if (this.#state !== 'reconnecting') return;
    try {
      const session = await this.#open();
      if (this.#state !== 'reconnecting') {
        session.lost = true;
        await session.connection.close().catch(() => {});
        return;
      }
      this.#session = session;
      this.#state = 'running';
      this.#reconnects++;
      this.#events.emit('connected', { reconnects: this.#reconnects });
    } catch (err) {
      this.#noteError(err, 'reconnect');
      if (this.#state === 'reconnecting') this.#schedule(serializeError(err));
    }
  }
}

/** Creates a {@link RabbitConsumer}; validates the options (naming the bad field). Call `start()`. */
export function createRabbitConsumer<R = unknown>(options: RabbitConsumerOptions<R>): RabbitConsumer<R> {
  return new RabbitConsumer(options);
}
