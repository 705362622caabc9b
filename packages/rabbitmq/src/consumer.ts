import { OnceError, type SerializedError } from '@once/core';
import {
  ConsumerBase,
  type ConsumerHealth,
  type ConsumerState,
  optionCheck,
  processGate,
  serializeError,
} from '@once/core/adapter';
import { type ChannelModel, type ConfirmChannel, connect } from 'amqplib';
import { ChannelConsumer, type ChannelConsumerContext } from './channel-consumer.js';
import { RabbitErrorCode, setupError } from './errors.js';
import { RABBIT_CONSUMER_EVENT_NAMES, type RabbitConsumerEventMap } from './events.js';
import {
  type RabbitConsumerOptions,
  type ResolvedRabbitConsumerOptions,
  resolveRabbitConsumerOptions,
} from './options.js';
import { declareTopology, type Topology, topologyOf } from './topology.js';

/** Lifecycle states of a {@link RabbitConsumer} (the kit's states). */
export type RabbitConsumerState = ConsumerState;

/**
 * A snapshot for health checks. `healthy`: running, connected, and the database and schema
 * usable.
 */
export interface RabbitConsumerHealth extends ConsumerHealth {
  /** Successful reconnects since start. */
  reconnects: number;
  /** Deliveries received and not yet acked to the broker. */
  unsettled: number;
  /** Handlers (or batches) running now. */
  active: number;
}

interface Session {
  connection: ChannelModel;
  work: ChannelConsumer<unknown>;
  lost: boolean;
}

/**
 * Consumes a RabbitMQ queue effectively once. Each delivery's id is claimed in the same Postgres
 * transaction as the handler's writes, and the delivery is acked only after COMMIT, in delivery
 * order through one watermark per channel. On connection or channel loss it backs off,
 * reconnects, re-declares the topology it owns and consumes again; deliveries of the lost channel
 * come back from the broker and the inbox turns them into duplicates. While the database or
 * once's schema cannot be used it cancels its consumer (basic.cancel: the broker hands over
 * nothing more) and consumes again once the schema checks out.
 *
 * Reconnection is our own rather than amqp-connection-manager's or amqplib 2.x's `recovery`: both
 * reconnect the connection, but acks must be tied to the exact channel a delivery came on (an old
 * tag acked on a new channel is a 406 that closes it: amqp-connection-manager#297), channel-level
 * closes need the same recovery as connection loss, and the topology and consumers are ours to
 * re-create anyway.
 *
 * `start()` connects, declares the topology and starts consuming. It rejects with a named error
 * when that first attempt fails (AMQP_CONNECT, AMQP_QUEUE_NOT_FOUND, AMQP_TOPOLOGY); after it,
 * faults are recovered by reconnecting. Never for the database: while PostgreSQL is down or
 * once's schema is missing or too new, the consumer runs unhealthy and takes no deliveries until
 * it can. `stop()` is graceful: it cancels the consumer, lets buffered and running messages finish
 * (up to `stopTimeoutMs`), sends their acks, closes the connection. Idempotent.
 */
export class RabbitConsumer<R = unknown> extends ConsumerBase<
  R,
  RabbitConsumerEventMap,
  RabbitConsumerHealth
> {
  /** The events this consumer adds to the kit's: `on()` refuses any other name. */
  protected readonly ownEventNames = RABBIT_CONSUMER_EVENT_NAMES;
  /** The AMQP options after defaults. */
  readonly options: ResolvedRabbitConsumerOptions;
  readonly #topology: Topology;
  #session: Session | undefined;
  #timer: NodeJS.Timeout | undefined;
  #attempt = 0;
  #reconnects = 0;
  #opening: Promise<unknown> | undefined;

  constructor(options: RabbitConsumerOptions<R>) {
    const { rabbit, inbox } = resolveRabbitConsumerOptions(options);
    super({
      name: 'once/rabbitmq',
      inbox: { ...inbox, consumer: rabbit.consumer },
      stopTimeoutMs: rabbit.stopTimeoutMs,
    });
    this.options = rabbit;
    this.#topology = topologyOf(rabbit);
  }

  /** Connects, declares the topology, consumes (unless the database is unusable). */
  protected async open(): Promise<void> {
    this.#session = await this.#connect();
    await this.resume();
    this.life.events.emit('connected', { reconnects: 0 });
  }

  /** Cancels the AMQP consumer (basic.cancel): the broker hands over nothing more. */
  protected async pause(): Promise<void> {
    await this.#session?.work.cancel();
  }

  /**
   * A snapshot for health checks: the kit's fields plus reconnects and deliveries held; healthy needs a live
   * connection and channel.
   */
  health(): RabbitConsumerHealth {
    const s = this.#session;
    const live = s && !s.lost ? s : undefined;
    return {
      ...this.life.health(live !== undefined),
      reconnects: this.#reconnects,
      unsettled: live?.work.unsettled ?? 0,
      active: live?.work.active ?? 0,
    };
  }

  /**
   * Consumes on the current session when the lifecycle says to fetch. Called on `resume`, and
   * after each (re)connect: a resume that came while no session was up finds it here.
   */
  protected async resume(): Promise<void> {
    const s = this.#session;
    if (!s || s.lost || !this.life.fetching) return;
    try {
      await s.work.consume();
    } catch (err) {
      this.#lose(s, err);
    }
  }

  /** Cancels the consumer and waits for buffered and running deliveries to settle. */
  protected async drain(): Promise<void> {
    clearTimeout(this.#timer);
    await this.#opening?.catch(() => {});
    const s = this.#session;
    if (!s || s.lost) return;
    await s.work.cancel();
    await s.work.drained();
  }

  /** Closes the channel (its acks go out first), then the connection. */
  protected async close(): Promise<void> {
    clearTimeout(this.#timer);
    const s = this.#session;
    this.#session = undefined;
    if (!s || s.lost) return;
    s.lost = true;
    await s.work.close();
    await s.connection.close().catch(() => {});
  }

  async #connect(): Promise<Session> {
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
      this.inbox.options.logger.warn({ reason }, 'once/rabbitmq: connection blocked by the broker'),
    );
    try {
      const ch = await this.#channel(connection, lose);
      await declareTopology(ch, this.options, this.#topology);
      const ctx: ChannelConsumerContext<R> = {
        inbox: this.inbox,
        options: this.options,
        topology: this.#topology,
        events: this.life.events,
        gate: processGate(),
        starts: this.starts,
        onLost: lose,
      };
      session.work = new ChannelConsumer(ch, ctx) as ChannelConsumer<unknown>;
      await session.work.open();
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

  #noteError(err: unknown, where: string): void {
    this.inbox.options.logger.warn({ error: String(err) }, `once/rabbitmq: ${where} error`);
    this.life.noteError(where, err);
  }

  /** The session is gone (connection or its channel): drop its tags, reconnect. */
  #lose(session: Session, err: unknown): void {
    if (session.lost) return;
    session.lost = true;
    session.work?.lose();
    // A channel-level close leaves the connection up: close it so the channel starts over.
    session.connection.close().catch(() => {});
    if (this.#session !== session || this.life.stopping) return;
    this.#session = undefined;
    this.life.set('reconnecting');
    const error = serializeError(err);
    this.life.events.emit('error', { where: 'connection', error });
    this.life.events.emit('disconnected', { error });
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
    this.life.events.emit('reconnect-scheduled', { attempt, delayMs, error });
    this.#timer = setTimeout(() => void this.#reconnect(), delayMs);
  }

  async #reconnect(): Promise<void> {
    if (this.life.state !== 'reconnecting') return;
    try {
      const session = await this.#connect();
      if (this.life.state !== 'reconnecting') {
        session.lost = true;
        await session.connection.close().catch(() => {});
        return;
      }
      this.#session = session;
      this.life.set('running');
      // While the database is unusable the broker keeps the messages: consume once it is back.
      await this.resume();
      this.#reconnects++;
      this.life.events.emit('connected', { reconnects: this.#reconnects });
    } catch (err) {
      this.#noteError(err, 'reconnect');
      if (this.life.state === 'reconnecting') this.#schedule(serializeError(err));
    }
  }
}

/** Creates a {@link RabbitConsumer}; validates the options (naming the bad field). Call `start()`. */
export function createRabbitConsumer<R = unknown>(options: RabbitConsumerOptions<R>): RabbitConsumer<R> {
  return optionCheck.namingFactory('createRabbitConsumer', () => new RabbitConsumer(options));
}
