import { type Inbox, type Outcome, serializeError } from '@once/core';
import { DEAD_LETTER_RECORD, encodeDeadLetterRecord } from '@once/core/adapter';
import type { ConfirmChannel, ConsumeMessage } from 'amqplib';
import { type AckKind, AckWatermark } from './ack-watermark.js';
import { ConfirmedPublisher } from './confirmed-publish.js';
import { envelopeOf } from './envelope-of.js';
import type { RabbitEvents } from './events.js';
import { Header, intHeader } from './headers.js';
import type { ResolvedRabbitOptions } from './options.js';
import { republishOptions } from './republish.js';
import { type RabbitSettlePlan, settlePlanOf } from './settle-plan.js';
import type { Topology } from './topology.js';

/** `work` consumes the work queue; `quarantine` runs redelivered messages one at a time. */
export type ChannelRole = 'work' | 'quarantine';

/** What a channel consumer shares with its owner. */
export interface ChannelConsumerContext<R> {
  inbox: Inbox<R>;
  options: ResolvedRabbitOptions;
  topology: Topology;
  events: RabbitEvents;
  consumer: string;
  /** Called when the channel cannot be used any more (closed, refused a send, consumer cancelled). */
  onLost(err: unknown): void;
}

/** A failed republish is retried by the broker (requeue); this pause keeps a stuck route from spinning. */
const REQUEUE_PAUSE_MS = 1_000;

/**
 * Consumes one queue on one confirm channel: buffers the prefetch window, runs messages (or
 * batches) through the inbox with bounded concurrency, and settles each through the channel's
 * ack watermark after the Postgres commit. Retries and dead letters are republished on the same
 * channel and acked only once the broker confirmed the copy.
 *
 * A delivery flagged `redelivered` was unsettled when a consumer died or lost its channel: it may
 * be the message that killed the process. It is not run here: it is copied to the quarantine
 * queue with `x-once-redeliveries` raised, and acked. The quarantine queue is consumed with
 * prefetch 1, so a killer message dies alone there; only its own count rises, never its
 * neighbours', and past `maxRedeliveries` it is dead-lettered without running.
 */
export class ChannelConsumer<R> {
  readonly #ch: ConfirmChannel;
  readonly #role: ChannelRole;
  readonly #ctx: ChannelConsumerContext<R>;
  readonly #queue: string;
  readonly #watermark: AckWatermark;
  readonly #publisher: ConfirmedPublisher;
  readonly #buffer: ConsumeMessage[] = [];
  readonly #pending = new Set<Promise<void>>();
  #active = 0;
  #tag: string | undefined;
  #lost = false;
  #flushScheduled = false;
  #idle: (() => void)[] = [];

  constructor(ch: ConfirmChannel, role: ChannelRole, ctx: ChannelConsumerContext<R>) {
    this.#ch = ch;
    this.#role = role;
    this.#ctx = ctx;
    this.#queue = role === 'work' ? ctx.topology.queue : ctx.topology.quarantine;
    this.#watermark = new AckWatermark(ch, (err) => ctx.onLost(err));
    this.#publisher = new ConfirmedPublisher(ch);
  }

  get #batch(): boolean {
    return this.#role === 'work' && this.#ctx.options.batch;
  }

  async start(): Promise<void> {
    const o = this.#ctx.options;
    await this.#ch.prefetch(this.#role === 'work' ? o.prefetch : 1);
    const { consumerTag } = await this.#ch.consume(this.#queue, (m) => this.#onMessage(m), { noAck: false });
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

  /** Stops new deliveries; buffered ones still run. */
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
    return this.#buffer.length === 0 && this.#active === 0 && this.#pending.size === 0;
  }

  #checkIdle(): void {
    if (!this.#isIdle() && !this.#lost) return;
    this.#watermark.flush();
    for (const resolve of this.#idle.splice(0)) resolve();
  }

  #onMessage(m: ConsumeMessage | null): void {
    if (m === null) {
      this.#ctx.onLost(
        new Error(`the broker cancelled the consumer of queue '${this.#queue}' (was it deleted?)`),
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
    if (m.fields.redelivered) {
      this.#track(this.#quarantine(m));
      return;
    }
    this.#buffer.push(m);
    this.#pump();
  }

  #track(p: Promise<void>): void {
    const tracked = p
      .catch((err: unknown) => this.#error(err, 'settle'))
      .finally(() => {
        this.#pending.delete(tracked);
        this.#checkIdle();
      });
    this.#pending.add(tracked);
  }

  #pump(): void {
    const o = this.#ctx.options;
    const concurrency = this.#role === 'work' ? o.concurrency : 1;
    while (!this.#lost && this.#active < concurrency && this.#buffer.length > 0) {
      const take = this.#buffer.splice(0, this.#batch ? o.batchSize : 1);
      this.#active++;
      this.#run(take)
        .catch((err: unknown) => this.#error(err, 'process'))
        .finally(() => {
          this.#active--;
          this.#pump();
          this.#checkIdle();
        });
    }
  }

  async #run(messages: ConsumeMessage[]): Promise<void> {
    const o = this.#ctx.options;
    const quarantined = this.#role === 'quarantine';
    const envelopes = messages.map((m) => envelopeOf(m, o.queue, o.idHeader, quarantined));
    let outcomes: Outcome<R>[];
    try {
      outcomes =
        envelopes.length > 1
          ? await this.#ctx.inbox.processBatch(envelopes)
          : [await this.#ctx.inbox.process(envelopes[0]!)];
    } catch (err) {
      // The inbox answers every message with an outcome and throws for none: this is a bug. Hand
      // the messages back to the broker (they come again as redeliveries) and say so.
      this.#error(err, 'inbox');
      await pause(REQUEUE_PAUSE_MS);
      for (const m of messages) this.#done(m, 'requeue');
      return;
    }
    // A batch stops at its first retry; the messages behind it never ran. They are still in our
    // prefetch window, so run them again at once instead of sending them through a retry tier.
    const rerun: ConsumeMessage[] = [];
    const settles: Promise<void>[] = [];
    outcomes.forEach((outcome, i) => {
      const plan = settlePlanOf(outcome, this.#ctx.consumer, o.retryTiersMs);
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
      await pause(REQUEUE_PAUSE_MS);
      this.#done(m, 'requeue');
      return;
    }
    this.#done(m, 'ack');
    this.#ctx.events.emit('settled', { id: outcome.id, status: outcome.status, plan: plan.kind });
  }

  async #quarantine(m: ConsumeMessage): Promise<void> {
    const headers = m.properties.headers as Record<string, unknown> | undefined;
    const count = intHeader(headers, Header.redeliveries, 0) + 1;
    try {
      await this.#publisher.publish(
        '',
        this.#ctx.topology.quarantine,
        m.content,
        republishOptions(m, { [Header.redeliveries]: count }),
      );
    } catch (err) {
      this.#error(err, 'quarantine');
      await pause(REQUEUE_PAUSE_MS);
      this.#done(m, 'requeue');
      return;
    }
    this.#done(m, 'ack');
    const id: unknown = m.properties.messageId;
    this.#ctx.events.emit('settled', {
      id: typeof id === 'string' ? id : undefined,
      status: 'quarantined',
      plan: 'quarantine',
    });
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

  #error(err: unknown, context: string): void {
    this.#ctx.options.logger.warn('once/rabbitmq: channel consumer error', { context, error: String(err) });
    this.#ctx.events.emit('error', { error: serializeError(err), context: `${this.#role}:${context}` });
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
