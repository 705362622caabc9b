import type { Inbox, Outcome } from '@once/core';
import {
  DEAD_LETTER_RECORD,
  deadLetteredEvent,
  encodeDeadLetterRecord,
  type Gate,
  processGroup,
  type StartCounter,
  serializeError,
  sleep,
  type TypedEmitter,
  takeGroup,
} from '@once/core/adapter';
import type { ConfirmChannel, ConsumeMessage } from 'amqplib';
import { type AckKind, AckWatermark } from './ack-watermark.js';
import { ConfirmedPublisher } from './confirmed-publish.js';
import { envelopeOf } from './envelope-of.js';
import type { RabbitConsumerEventMap } from './events.js';
import { Header } from './headers.js';
import type { ResolvedRabbitConsumerOptions } from './options.js';
import { republishOptions } from './republish.js';
import { type RabbitSettlePlan, settlePlanOf } from './settle-plan.js';
import type { Topology } from './topology.js';

/** What a channel consumer shares with its owner. */
export interface ChannelConsumerContext<R> {
  inbox: Inbox<R>;
  options: ResolvedRabbitConsumerOptions;
  topology: Topology;
  events: TypedEmitter<RabbitConsumerEventMap>;
  /** Fresh deliveries run shared, redelivered ones exclusive, across the whole process. */
  gate: Gate;
  /** Counts the starts of redelivered deliveries in Postgres: the killer budget. */
  counter: StartCounter<R>;
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
 * be the message that killed the process. It runs alone, in its own transaction, holding the
 * process-wide gate exclusive, and its start is counted in Postgres just before its handler
 * (`StartCounter`). When it kills the process again nothing else was running, so only its own
 * count rose; its neighbours complete when their turn comes. Past core's `maxAttempts` starts it
 * is recorded failed (`max-attempts`) without running, and dead-lettered.
 */
export class ChannelConsumer<R> {
  readonly #ch: ConfirmChannel;
  readonly #ctx: ChannelConsumerContext<R>;
  readonly #watermark: AckWatermark;
  readonly #publisher: ConfirmedPublisher;
  readonly #buffer: ConsumeMessage[] = [];
  #active = 0;
  #tag: string | undefined;
  #lost = false;
  #flushScheduled = false;
  #idle: (() => void)[] = [];

  constructor(ch: ConfirmChannel, ctx: ChannelConsumerContext<R>) {
    this.#ch = ch;
    this.#ctx = ctx;
    this.#watermark = new AckWatermark(ch, (err) => ctx.onLost(err));
    this.#publisher = new ConfirmedPublisher(ch);
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
    return this.#active;
  }

  /** The channel is gone: drop the buffer (the broker redelivers it) and never ack again. */
  lose(): void {
    this.#lost = true;
    this.#watermark.kill();
    this.#buffer.length = 0;
    this.#checkIdle();
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
    if (this.#isIdle()) {
      this.#watermark.flush();
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #isIdle(): boolean {
    return this.#buffer.length === 0 && this.#active === 0;
  }

  #checkIdle(): void {
    if (!this.#isIdle() && !this.#lost) return;
    this.#watermark.flush();
    for (const resolve of this.#idle.splice(0)) resolve();
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
    this.#buffer.push(m);
    this.#pump();
  }

  #pump(): void {
    const o = this.#ctx.options;
    while (!this.#lost && this.#active < o.concurrency && this.#buffer.length > 0) {
      const { group: take, suspect } = takeGroup(
        this.#buffer,
        (m) => m.fields.redelivered,
        o.batch ? o.batchSize : 1,
      );
      this.#active++;
      this.#run(take, suspect)
        .catch((err: unknown) => this.#error(err, 'process'))
        .finally(() => {
          this.#active--;
          this.#pump();
          this.#checkIdle();
        });
    }
  }

  async #run(messages: ConsumeMessage[], suspect: boolean): Promise<void> {
    const o = this.#ctx.options;
    const envelopes = messages.map((m) => envelopeOf(m, o.queue, o.idHeader));
    let outcomes: Outcome<R>[];
    try {
      outcomes = await processGroup(this.#ctx, envelopes, suspect);
    } catch (err) {
      // The inbox answers every message with an outcome and throws for none: this is a bug. Hand
      // the messages back to the broker (they come again as redeliveries) and say so. The gate is
      // left by now: not held through the pause.
      this.#error(err, 'inbox');
      await sleep(REQUEUE_PAUSE_MS);
      for (const m of messages) this.#done(m, 'requeue');
      return;
    }
    // A batch stops at its first retry; the messages behind it never ran. They are still in our
    // prefetch window, so run them again at once instead of sending them through a retry tier.
    const rerun: ConsumeMessage[] = [];
    const settles: Promise<void>[] = [];
    outcomes.forEach((outcome, i) => {
      const plan = settlePlanOf(outcome, o.consumer, o.retryTiersMs);
      if (plan.kind === 'rerun') rerun.push(messages[i]!);
      else settles.push(this.#settle(messages[i]!, outcome, plan));
    });
    if (rerun.length > 0 && !this.#lost) this.#buffer.unshift(...rerun);
    await Promise.all(settles);
  }

  async #settle(m: ConsumeMessage, outcome: Outcome<R>, plan: RabbitSettlePlan): Promise<void> {
    const t = this.#ctx.topology;
    try {
      if (plan.kind === 'retry') {
        const queue = t.retry.get(plan.tierMs)!;
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
    this.#ctx.events.emit('settled', { id: outcome.id, status: outcome.status, plan: plan.kind });
    if (plan.kind === 'dead-letter' && (outcome.status === 'failed' || outcome.status === 'conflict')) {
      this.#ctx.events.emit('message:dead-lettered', deadLetteredEvent(outcome, t.deadLetterExchange));
    }
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
