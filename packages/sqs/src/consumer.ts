import { type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { Envelope } from '@once/core';
import {
  ConsumerBase,
  type ConsumerHealth,
  type ConsumerState,
  KeyedSerializer,
  Limiter,
  optionCheck,
  processGate,
  serializeError,
  sleep,
  warnIfRetentionShort,
} from '@once/core/adapter';
import { warnIfNoClientTimeouts } from './client-timeouts.js';
import { envelopeOf } from './envelope-of.js';
import { SQS_CONSUMER_EVENT_NAMES, type SqsConsumerEventMap } from './events.js';
import type { Held } from './held.js';
import { KeyLanes } from './key-lanes.js';
import {
  type ResolvedSqsConsumerOptions,
  resolveSqsConsumerOptions,
  type SqsConsumerOptions,
} from './options.js';
import { planChains } from './plan-chains.js';
import { checkIdSource, resolveDeadLetter } from './queue-checks.js';
import { type QueueInfo, queueInfo } from './queue-info.js';
import { type ChainContext, runBatch, runChain } from './run-chain.js';
import { Settler, toSeconds } from './settler.js';

/** Where the consumer is in its life (the kit's states; an SQS consumer is never `reconnecting`). */
export type SqsConsumerState = ConsumerState;

/**
 * A snapshot for health checks. `healthy`: running, the database and schema usable, and receives
 * not failing `unhealthyAfterErrors` times in a row.
 */
export interface SqsConsumerHealth extends ConsumerHealth {
  /** The URL of the queue consumed (the `queueUrl` option). */
  queueUrl: string;
  /** Messages received and not yet settled. */
  held: number;
  /** Handlers (or batch transactions) running. */
  running: number;
  /** Epoch ms of the last successful receive. */
  lastReceiveAt: number | undefined;
  /**
   * ReceiveMessage failures in a row since the last success; at `unhealthyAfterErrors` the consumer reports
   * unhealthy.
   */
  consecutiveReceiveErrors: number;
}

/**
 * Polls one SQS queue and processes each message effectively once through a core inbox: the
 * handler's writes and the message's claim commit together, and the message is deleted only
 * after that commit. While the database or once's schema cannot be used it receives nothing, and
 * begins again once the schema checks out. Create it with {@link createSqsConsumer}.
 *
 * `start()` checks the queue (it must exist; a `deduplication-id` id needs a FIFO queue without
 * content-based deduplication; the dead-letter queue must exist), then starts receiving. It
 * rejects with a named OnceError when a check fails (`SQS_QUEUE_NOT_FOUND`, `SQS_UNREACHABLE`,
 * `SQS_QUEUE_MISMATCH`); state `failed` then. Never for the database: while PostgreSQL is down or
 * once's schema is missing or too new, the consumer runs unhealthy and receives nothing, and
 * begins once the schema checks out. `stop()` is graceful: no new receives (a long poll in flight
 * is aborted), messages already held are processed and settled (within `stopTimeoutMs`), then the
 * heartbeat ends. The client and pool stay open. Idempotent.
 */
export class SqsConsumer<R = unknown> extends ConsumerBase<R, SqsConsumerEventMap, SqsConsumerHealth> {
  /** The events this consumer adds to the kit's: `on()` refuses any other name. */
  protected readonly ownEventNames = SQS_CONSUMER_EVENT_NAMES;
  /** The SQS options after defaults. */
  readonly options: ResolvedSqsConsumerOptions;
  readonly #held = new Map<string, Held>();
  readonly #limiter: Limiter;
  readonly #serializer = new KeyedSerializer();
  /** Set with `batch` and `keyOf`: forms the batches of a standard queue by key. */
  readonly #lanes: KeyLanes | undefined;
  readonly #settler: Settler;
  readonly #chainContext: ChainContext<R>;
  readonly #tasks = new Set<Promise<unknown>>();
  /** Aborted by stop(): ends a long poll in flight and any backoff sleep. */
  readonly #abort = new AbortController();
  #queue: QueueInfo | undefined;
  #reserved = 0;
  #capacityWaiters: (() => void)[] = [];
  /** Receivers waiting for the lifecycle to fetch again (the database is back). */
  #resumeWaiters: (() => void)[] = [];
  #receivers: Promise<void>[] = [];
  #heartbeat: NodeJS.Timeout | undefined;
  #lastReceiveAt: number | undefined;
  #receiveErrors = 0;

  constructor(options: SqsConsumerOptions<R>) {
    const { sqs, inbox } = resolveSqsConsumerOptions(options);
    super({
      name: 'once/sqs',
      inbox: { ...inbox, consumer: sqs.consumer },
      stopTimeoutMs: sqs.stopTimeoutMs,
      // SQS counts receives, not runs: a message's attempt is its starts counted in Postgres, and
      // a redelivered message started more than maxAttempts times (it keeps killing the process)
      // is failed unrun.
      attemptIsStarts: true,
    });
    this.options = sqs;
    this.#limiter = new Limiter(sqs.concurrency);
    const logger = this.inbox.options.logger;
    this.#settler = new Settler({
      client: sqs.client,
      queueUrl: sqs.queueUrl,
      settleContext: this.inbox.options,
      idHeader: sqs.idHeader,
      lingerMs: sqs.settleLingerMs,
      logger,
      events: this.life.events,
      noteError: (where, err) => this.life.noteError(where, err),
      retryDelayMs: (attempt) => this.inbox.options.retryDelayMs(Math.max(1, attempt)),
      forget: (e) => this.#forget(e),
      track: (p) => this.#track(p),
    });
    this.#chainContext = {
      inbox: this.inbox,
      limiter: this.#limiter,
      settler: this.#settler,
      gate: processGate(),
      starts: this.starts,
      logger,
      forget: (e) => this.#forget(e),
      noteError: (where, err) => this.life.noteError(where, err),
    };
    this.#lanes =
      sqs.batch && sqs.keyOf
        ? new KeyLanes({
            // Room for two batches of ten per lane among the messages held: one running, the next
            // one filling meanwhile. More lanes would only split them into smaller batches.
            lanes: Math.max(1, Math.min(sqs.concurrency, Math.round(sqs.maxInFlight / 20))),
            maxBatch: 10,
            run: (entries, batch) => this.#runLane(entries, batch),
            track: (p) => this.#track(p),
          })
        : undefined;
  }

  /** Runs what a lane took: a batch, or one redelivered message; never rejects. */
  #runLane(entries: Held[], batch: boolean): Promise<void> {
    const run = batch ? runBatch(this.#chainContext, entries) : runChain(this.#chainContext, entries);
    return run.catch((err: unknown) => {
      this.inbox.options.logger.error({ error: String(err) }, 'once/sqs: a batch failed unexpectedly');
    });
  }

  /** The queue's attributes as read at start. */
  get queue(): QueueInfo | undefined {
    return this.#queue;
  }

  /**
   * A snapshot for health checks: the kit's fields plus the queue, messages held and running, and the receive
   * record; healthy needs fewer than `unhealthyAfterErrors` failed receives in a row.
   */
  health(): SqsConsumerHealth {
    return {
      ...this.life.health(this.#receiveErrors < this.options.unhealthyAfterErrors),
      queueUrl: this.options.queueUrl,
      held: this.#held.size,
      running: this.#limiter.active,
      lastReceiveAt: this.#lastReceiveAt,
      consecutiveReceiveErrors: this.#receiveErrors,
    };
  }

  // ---------------------------------------------------------------- life

  /** Checks the queue and the dead-letter target, starts the heartbeat and the receivers. */
  protected async open(): Promise<void> {
    const o = this.options;
    await warnIfNoClientTimeouts(o.client, this.inbox.options.logger, o.waitTimeSeconds);
    this.#queue = await queueInfo(o.client, o.queueUrl);
    checkIdSource(o, this.inbox.options, this.#queue);
    if (this.#queue.retentionS !== undefined && Number.isFinite(this.#queue.retentionS)) {
      warnIfRetentionShort(this.inbox.options.logger, {
        consumer: this.inbox.options.consumer,
        retentionMs: this.inbox.options.retentionMs,
        horizonMs: this.#queue.retentionS * 1000,
        source: `SQS queue ${o.queueUrl} (MessageRetentionPeriod)`,
      });
    }
    this.#settler.target = await resolveDeadLetter(o, this.#queue);
    if (o.heartbeat) {
      this.#heartbeat = setInterval(() => this.#beat(), o.heartbeatIntervalMs);
      this.#heartbeat.unref?.();
    }
    for (let i = 0; i < o.receivers; i++) this.#receivers.push(this.#receiveLoop());
  }

  /**
   * Receivers check `fetching` before each receive; a poll in flight still lands and its messages
   * come back `not-run` (made visible again after core's delay), nothing spent.
   */
  protected pause(): void {}

  /** Wakes the receivers waiting for the database. */
  protected resume(): void {
    this.#wakeReceivers();
  }

  /** Ends the receivers (a long poll in flight is aborted), waits for the held messages to settle. */
  protected async drain(): Promise<void> {
    this.#abort.abort();
    this.#wakeReceivers();
    for (const wake of this.#capacityWaiters.splice(0)) wake();
    await Promise.all(this.#receivers);
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    await this.#settler.drain();
  }

  /** Ends what is left: the receivers, the heartbeat. */
  protected async close(): Promise<void> {
    // Past the stop deadline too: held messages are no longer extended and come back to the queue.
    this.#abort.abort();
    this.#wakeReceivers();
    clearInterval(this.#heartbeat);
  }

  #wakeReceivers(): void {
    for (const wake of this.#resumeWaiters.splice(0)) wake();
  }

  // ---------------------------------------------------------------- receiving

  async #receiveLoop(): Promise<void> {
    const o = this.options;
    let backoffMs = o.receiveBackoffMs;
    while (!this.life.stopping) {
      if (!this.life.fetching) {
        // The database or schema cannot be used: take nothing until the lifecycle resumes.
        await new Promise<void>((resolve) => this.#resumeWaiters.push(resolve));
        continue;
      }
      const want = await this.#reserve();
      if (want === 0) break;
      if (!this.life.fetching) {
        this.#reserved -= want;
        continue;
      }
      let messages: Message[];
      try {
        const res = await o.client.send(
          new ReceiveMessageCommand({
            QueueUrl: o.queueUrl,
            MaxNumberOfMessages: want,
            WaitTimeSeconds: o.waitTimeSeconds,
            VisibilityTimeout: o.visibilityTimeoutS,
            MessageSystemAttributeNames: ['All'],
            MessageAttributeNames: ['All'],
          }),
          { abortSignal: this.#abort.signal },
        );
        messages = res.Messages ?? [];
      } catch (err) {
        this.#reserved -= want;
        if (this.life.stopping) break;
        this.#receiveErrors++;
        const error = serializeError(err);
        this.life.noteError('receive', err);
        this.life.events.emit('receive:error', { error, consecutive: this.#receiveErrors, backoffMs });
        this.inbox.options.logger.warn(
          {
            queueUrl: o.queueUrl,
            error: error.message,
            backoffMs,
          },
          'once/sqs: receive failed; retrying',
        );
        await sleep(backoffMs, this.#abort.signal);
        backoffMs = Math.min(backoffMs * 2, o.receiveBackoffMaxMs);
        continue;
      }
      this.#reserved -= want;
      this.#receiveErrors = 0;
      backoffMs = o.receiveBackoffMs;
      this.#lastReceiveAt = Date.now();
      this.life.events.emit('received', {
        count: messages.length,
        redelivered: messages.filter((m) => Number(m.Attributes?.ApproximateReceiveCount ?? 1) > 1).length,
      });
      // A response that raced stop() is still processed: its messages are ours now.
      if (messages.length > 0) this.#dispatch(messages);
    }
  }

  /** Waits until there is room below `maxInFlight` and reserves it; 0 once stopping. */
  async #reserve(): Promise<number> {
    for (;;) {
      if (this.life.stopping) return 0;
      // Wait for room for a full receive: many small receives cost more requests than they save.
      const room = this.options.maxInFlight - this.#held.size - this.#reserved;
      if (room >= Math.min(10, this.options.maxInFlight)) {
        const want = Math.min(10, room);
        this.#reserved += want;
        return want;
      }
      await new Promise<void>((resolve) => this.#capacityWaiters.push(resolve));
    }
  }

  // ---------------------------------------------------------------- dispatch

  #dispatch(messages: Message[]): void {
    const now = performance.now();
    const fifo = this.#queue?.fifo ?? false;
    const mode = this.inbox.options.mode;
    const lease = mode !== 'transaction' && mode.lease !== undefined;
    const entries: Held[] = [];
    for (const message of messages) {
      if (!message.ReceiptHandle) continue;
      // Lease mode: core's lease clock drives this message's visibility once it is claimed (the
      // envelope is made with it; `held` is read only when the clock runs).
      const liveness = lease ? { extend: (ms: number) => this.#settler.lease(held, ms) } : undefined;
      const envelope = envelopeOf(message, this.options, liveness);
      const held: Held = {
        message,
        envelope,
        receipt: message.ReceiptHandle,
        group: fifo ? (message.Attributes?.MessageGroupId ?? message.ReceiptHandle) : undefined,
        key: this.#keyOf(envelope),
        receivedAt: now,
        extendedAt: now,
        capped: false,
        settling: false,
      };
      this.#held.set(held.receipt, held);
      entries.push(held);
    }
    // Standard queue, batches by key: lanes form them (FIFO keeps its groups' order in chains).
    if (this.#lanes && !fifo) {
      this.#lanes.add(entries);
      return;
    }
    const chains = planChains(entries, { fifo, batch: this.options.batch });
    for (const chain of chains) {
      const run = chain.batch
        ? () => runBatch(this.#chainContext, chain.entries)
        : () => runChain(this.#chainContext, chain.entries);
      this.#track(
        this.#serializer.run(chain.keys, run).catch((err: unknown) => {
          this.inbox.options.logger.error({ error: String(err) }, 'once/sqs: a chain failed unexpectedly');
        }),
      );
    }
  }

  /** `keyOf`'s key for a batch; a throw or a non-string is no key (it only shapes batches). */
  #keyOf(envelope: Envelope): string | undefined {
    const { keyOf, batch } = this.options;
    if (!keyOf || !batch) return undefined;
    try {
      const key = keyOf(envelope);
      return typeof key === 'string' ? key : undefined;
    } catch (err) {
      this.inbox.options.logger.warn(
        {
          messageId: envelope.id,
          error: serializeError(err).message,
        },
        'once/sqs: keyOf threw; the message is batched without a key',
      );
      return undefined;
    }
  }

  #track<T>(p: Promise<T>): Promise<T> {
    this.#tasks.add(p);
    void p.finally(() => this.#tasks.delete(p)).catch(() => {});
    return p;
  }

  #forget(e: Held): void {
    if (!this.#held.delete(e.receipt)) return;
    const wake = this.#capacityWaiters.shift();
    wake?.();
  }

  // ---------------------------------------------------------------- heartbeat

  /**
   * Extends every held message that is due, up to `maxHeldMs` from its receipt. Messages a lease
   * holds are left to core's lease clock (one clock, not two).
   */
  #beat(): void {
    const now = performance.now();
    const { maxHeldMs, heartbeatIntervalMs, visibilityTimeoutS } = this.options;
    for (const e of this.#held.values()) {
      if (e.settling || e.capped || e.leased) continue;
      const heldMs = now - e.receivedAt;
      if (heldMs >= maxHeldMs) {
        e.capped = true;
        this.inbox.options.logger.warn(
          {
            messageId: e.message.MessageId,
          },
          'once/sqs: message held past maxHeldMs; no longer extended',
        );
        this.life.events.emit('heartbeat:cap', { messageId: e.message.MessageId, heldMs });
        continue;
      }
      if (now - e.extendedAt < heartbeatIntervalMs / 2) continue;
      e.extendedAt = now;
      const seconds = Math.max(1, Math.min(visibilityTimeoutS, toSeconds(maxHeldMs - heldMs)));
      this.#settler.extend(e, seconds);
    }
  }
}

/** Creates an {@link SqsConsumer}; validates the options and names the first bad field. Call `start()` next. */
export function createSqsConsumer<R = unknown>(options: SqsConsumerOptions<R>): SqsConsumer<R> {
  return optionCheck.namingFactory('createSqsConsumer', () => new SqsConsumer(options));
}
