import type { Inbox } from '@once/core';
import {
  DEAD_LETTER_RECORD,
  DeliveryPipeline,
  deadLetteredEvent,
  encodeDeadLetterRecord,
  type Gate,
  runsAlone,
  type SettlePlan,
  type StartBudgets,
  serializeError,
  sleep,
  type TypedEmitter,
} from '@once/core/adapter';
import type { ConfirmChannel, ConsumeMessage } from 'amqplib';
import { type AckKind, AckWatermark } from './ack-watermark.js';
import { ConfirmedPublisher } from './confirmed-publish.js';
import { attemptOf, envelopeOf } from './envelope-of.js';
import type { RabbitConsumerEventMap } from './events.js';
import { Header } from './headers.js';
import type { ResolvedRabbitConsumerOptions } from './options.js';
import { republishOptions } from './republish.js';
import { type Topology, tierFor } from './topology.js';

/** What a channel consumer shares with its owner. */
export interface ChannelConsumerContext<R> {
  inbox: Inbox<R>;
  options: ResolvedRabbitConsumerOptions;
  topology: Topology;
  events: TypedEmitter<RabbitConsumerEventMap>;
  /** Fresh deliveries run shared, redelivered ones exclusive, across the whole process. */
  gate: Gate;
  /** The killer budget's call options: the inbox counts the starts of a delivery that runs alone. */
  starts: StartBudgets<R>;
  /** Called when the channel cannot be used any more (closed, refused a send, consumer cancelled). */
  onLost(err: unknown): void;
}

/** A failed republish is retried by the broker (requeue); this pause keeps a stuck route from spinning. */
const REQUEUE_PAUSE_MS = 1_000;

/**
 * Consumes the work queue on one confirm channel: buffers the prefetch window, runs messages (or
 * batches) through the inbox with bounded concurrency, and settles each through the channel's
 * ack watermark after the Postgres commit. Retries and dead letters are republished on the same
 * channel and acked only once the broker confirmed the copy.
 *
 * A delivery flagged `redelivered` was unsettled when a consumer died or lost its channel: it may
 * be the message that killed the process (a retry, `x-once-attempt` above 1, is treated alike:
 * `runsAlone`). It runs alone, in its own transaction, holding the
 * process-wide gate exclusive, and the inbox counts its start in Postgres just before its handler
 * (`StartBudgets.suspect`). When it kills the process again nothing else was running, so only its own
 * count rose; its neighbours complete when their turn comes. Past core's `maxAttempts` starts it
 * is recorded failed (`max-attempts`) without running, and dead-lettered.
 */
export class ChannelConsumer<R> {
  readonly #ch: ConfirmChannel;
  readonly #ctx: ChannelConsumerContext<R>;
  readonly #watermark: AckWatermark;
  readonly #publisher: ConfirmedPublisher;
  /** The prefetch window, run through the inbox in groups. */
  readonly #pipeline: DeliveryPipeline<ConsumeMessage, R>;
  #tag: string | undefined;
  #lost = false;
  #flushScheduled = false;

  constructor(ch: ConfirmChannel, ctx: ChannelConsumerContext<R>) {
    this.#ch = ch;
    this.#ctx = ctx;
    this.#watermark = new AckWatermark(ch, (err) => ctx.onLost(err));
    this.#publisher = new ConfirmedPublisher(ch);
    const o = ctx.options;
    this.#pipeline = new DeliveryPipeline<ConsumeMessage, R>({
      ...ctx,
      settleContext: ctx.inbox.options,
      concurrency: o.concurrency,
      batchSize: o.batch ? o.batchSize : 1,
      envelope: (m) => envelopeOf(m, o.queue, o.idHeader),
      runsAlone: (m) => runsAlone(m.fields.redelivered, attemptOf(m)),
      settle: (m, plan) => this.#settle(m, plan),
      // The inbox threw: hand the messages back (they come again as redeliveries) after a pause.
      handBack: async (messages) => {
        await sleep(REQUEUE_PAUSE_MS);
        for (const m of messages) this.#done(m, 'requeue');
      },
      onError: (where, err) => this.#error(err, where),
      onIdle: () => this.#watermark.flush(),
    });
  }

  /** Sets the prefetch window; deliveries start with {@link consume}. */
  async open(): Promise<void> {
    await this.#ch.prefetch(this.#ctx.options.prefetch);
  }

  /** Asks the broker for deliveries (again, after a {@link cancel}). */
  async consume(): Promise<void> {
    if (this.#tag !== undefined || this.#lost) return;
    const { consumerTag } = await this.#ch.consume(this.#ctx.options.queue, (m) => this.#onMessage(m), {
      noAck: false,
    });
    this.#tag = consumerTag;
  }

  /** Deliveries received and not yet settled with the broker. */
  get unsettled(): number {
    return this.#watermark.outstanding;
  }

  /** Messages (or batches) whose handler is running. */
  get active(): number {
    return this.#pipeline.active;
  }

  /** The channel is gone: drop the buffer (the broker redelivers it) and never ack again. */
  lose(): void {
    this.#lost = true;
    this.#watermark.kill();
    this.#pipeline.close();
  }

  /** Stops new deliveries (basic.cancel); buffered and unsettled ones still run and settle. */
  async cancel(): Promise<void> {
    if (this.#tag === undefined || this.#lost) return;
    const tag = this.#tag;
    this.#tag = undefined;
    await this.#ch.cancel(tag).catch(() => {});
  }

  /**
   * Closes the channel. Its acks are written on the channel's own stream ahead of channel.close,
   * and close-ok means the broker has processed them; closing the connection directly could let
   * its close frame overtake acks still queued in the channel's stream.
   */
  async close(): Promise<void> {
    this.#watermark.flush();
    await this.#ch.close().catch(() => {});
  }

  /** Resolves when nothing is buffered, running or unconfirmed, and the acks are sent. */
  drained(): Promise<void> {
    return this.#pipeline.idle();
  }

  #onMessage(m: ConsumeMessage | null): void {
    if (m === null) {
      this.#ctx.onLost(
        new Error(
          `the broker cancelled the consumer of queue '${this.#ctx.options.queue}' (was it deleted?)`,
        ),
      );
      return;
    }
    if (this.#lost) return;
    try {
      this.#watermark.track(m.fields.deliveryTag);
    } catch (err) {
      this.#ctx.onLost(err);
      return;
    }
    this.#pipeline.push(m);
    this.#pipeline.pump();
  }

  /** An ack is done at once (no promise); a retry or a dead letter waits for the broker's confirm. */
  #settle(m: ConsumeMessage, plan: SettlePlan): Promise<void> | undefined {
    if (plan.kind !== 'ack') return this.#republish(m, plan);
    this.#done(m, 'ack');
    this.#settled(plan);
    return undefined;
  }

  async #republish(m: ConsumeMessage, plan: SettlePlan): Promise<void> {
    const t = this.#ctx.topology;
    try {
      if (plan.kind === 'retry') {
        // Core's delay, rounded up to one of the retry tiers.
        const queue = t.retry.get(tierFor(plan.delayMs, this.#ctx.options.retryTiersMs))!;
        await this.#publisher.publish(
          '',
          queue,
          m.content,
          republishOptions(m, { [Header.attempt]: plan.attempt }),
        );
      } else if (plan.kind === 'dead-letter') {
        const headers = { [DEAD_LETTER_RECORD]: encodeDeadLetterRecord(plan.record) };
        await this.#publisher.publish(t.deadLetterExchange, t.queue, m.content, republishOptions(m, headers));
      }
    } catch (err) {
      this.#error(err, plan.kind);
      await sleep(REQUEUE_PAUSE_MS);
      this.#done(m, 'requeue');
      return;
    }
    this.#done(m, 'ack');
    this.#settled(plan);
    if (plan.kind === 'dead-letter')
      this.#ctx.events.emit('message:dead-lettered', deadLetteredEvent(plan, t.deadLetterExchange));
  }

  /** The `settled` event, built only when someone listens. */
  #settled(plan: SettlePlan): void {
    const events = this.#ctx.events;
    if (events.has('settled')) events.emit('settled', { id: plan.id, status: plan.outcome, plan: plan.kind });
  }

  #done(m: ConsumeMessage, kind: AckKind): void {
    if (!this.#watermark.settle(m.fields.deliveryTag, kind)) return;
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    // Coalesce: every settle of this turn goes out in one in-order pass.
    setImmediate(() => {
      this.#flushScheduled = false;
      this.#watermark.flush();
    });
  }

  #error(err: unknown, where: string): void {
    this.#ctx.inbox.options.logger.warn(
      {
        where,
        error: String(err),
      },
      'once/rabbitmq: channel consumer error',
    );
    this.#ctx.events.emit('error', { error: serializeError(err), where });
  }
}
