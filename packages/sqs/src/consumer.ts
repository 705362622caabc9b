import { type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import {
  createInbox,
  type Envelope,
  type Inbox,
  OnceError,
  type SerializedError,
  serializeError,
  warnIfRetentionShort,
} from '@once/core';
import { processGate } from '@once/core/adapter';
import { envelopeOf } from './envelope-of.js';
import { type SqsEventListener, type SqsEventName, SqsEvents } from './events.js';
import type { Held } from './held.js';
import { KeyLanes } from './key-lanes.js';
import { KeyedSerializer } from './keyed-serializer.js';
import { Limiter } from './limiter.js';
import {
  type DeadLetter,
  type ResolvedSqsConsumerOptions,
  resolveSqsConsumerOptions,
  type SqsConsumerOptions,
} from './options.js';
import { planChains } from './plan-chains.js';
import { type QueueInfo, queueInfo, SqsErrorCode } from './queue-info.js';
import { type ChainContext, runBatch, runChain } from './run-chain.js';
import { RunCounter } from './run-counter.js';
import { type DeadLetterTarget, Settler, toSeconds } from './settler.js';

/** Lifecycle of a consumer. */
export type SqsConsumerState = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';

/** What {@link SqsConsumer.health} reports. */
export interface SqsConsumerHealth {
  state: SqsConsumerState;
  /** Running, and receives are not failing `unhealthyAfterErrors` times in a row. */
  healthy: boolean;
  queueUrl: string;
  /** Messages received and not yet settled. */
  held: number;
  /** Handlers (or batch transactions) running. */
  running: number;
  /** Epoch ms of the last successful receive. */
  lastReceiveAt: number | undefined;
  consecutiveReceiveErrors: number;
  lastError: SerializedError | undefined;
}

/**
 * Polls one SQS queue and processes each message effectively once through a core inbox: the
 * handler's writes and the message's claim commit together, and the message is deleted only
 * after that commit. Create it with {@link createSqsConsumer}; `start()`, `stop()`, `health()`.
 */
export class SqsConsumer<R = unknown> {
  readonly options: ResolvedSqsConsumerOptions<R>;
  /** The core inbox; subscribe to message outcomes with `consumer.inbox.on('message:processed', ...)`. */
  readonly inbox: Inbox<R>;
  readonly #events: SqsEvents;
  readonly #held = new Map<string, Held>();
  readonly #limiter: Limiter;
  readonly #serializer = new KeyedSerializer();
  /** Set with `batch` and `keyOf`: forms the batches of a standard queue by key. */
  readonly #lanes: KeyLanes | undefined;
  readonly #settler: Settler;
  readonly #chainContext: ChainContext<R>;
  readonly #tasks = new Set<Promise<unknown>>();
  readonly #abort = new AbortController();
  #state: SqsConsumerState = 'idle';
  #queue: QueueInfo | undefined;
  #reserved = 0;
  #capacityWaiters: (() => void)[] = [];
  #receivers: Promise<void>[] = [];
  #heartbeat: NodeJS.Timeout | undefined;
  #stopping: Promise<void> | undefined;
  #lastReceiveAt: number | undefined;
  #receiveErrors = 0;
  #lastError: SerializedError | undefined;

  constructor(options: ResolvedSqsConsumerOptions<R>) {
    this.options = options;
    this.#events = new SqsEvents(options.logger);
    this.#limiter = new Limiter(options.concurrency);
    // Attempts are the handler's runs, counted in Postgres; a redelivered message started more
    // than maxAttempts times is the one that keeps killing the process: it is failed unrun.
    const runs = new RunCounter<R>({
      maxAttempts: options.maxAttempts,
      inbox: () => this.inbox,
      logger: options.logger,
      waitMs: 5_000,
    });
    this.inbox = createInbox({ ...options.inbox, handler: runs.guard(options.inbox.handler) });
    this.#settler = new Settler({
      client: options.client,
      queueUrl: options.queueUrl,
      consumer: this.inbox.options.consumer,
      idAttribute: options.idAttribute,
      lingerMs: options.settleLingerMs,
      logger: options.logger,
      events: this.#events,
      retryDelayMs: (attempt) => this.inbox.options.retryDelayMs(Math.max(1, attempt)),
      forget: (e) => this.#forget(e),
      track: (p) => this.#track(p),
    });
    this.#chainContext = {
      inbox: this.inbox,
      limiter: this.#limiter,
      settler: this.#settler,
      gate: processGate(),
      runs,
      logger: options.logger,
      forget: (e) => this.#forget(e),
      onFault: (error) => {
        this.#lastError = error;
      },
    };
    this.#lanes =
      options.batch && options.keyOf
        ? new KeyLanes({
            // Room for two batches of ten per lane among the messages held: one running, the next
            // one filling meanwhile. More lanes would only split them into smaller batches.
            lanes: Math.max(1, Math.min(options.concurrency, Math.round(options.maxInFlight / 20))),
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
      this.options.logger.error('once/sqs: a batch failed unexpectedly', { error: String(err) });
    });
  }

  /** Subscribe to an SQS-side event; returns an unsubscribe function. */
  on<E extends SqsEventName>(name: E, listener: SqsEventListener<E>): () => void {
    return this.#events.on(name, listener);
  }

  get state(): SqsConsumerState {
    return this.#state;
  }

  /** The queue's attributes as read at start. */
  get queue(): QueueInfo | undefined {
    return this.#queue;
  }

  /**
   * Checks the schema and the queue (it must exist; a `deduplication-id` id needs a FIFO queue
   * without content-based deduplication; the dead-letter policy must be usable), then starts
   * receiving. Throws a named OnceError when any check fails; nothing is left running then.
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle')
      throw new OnceError('INVALID_STATE', `start() called on a consumer that is ${this.#state}`);
    this.#state = 'starting';
    try {
      await this.inbox.ready();
      this.#queue = await queueInfo(this.options.client, this.options.queueUrl);
      this.#checkIdSource(this.#queue);
      if (this.#queue.retentionS !== undefined && Number.isFinite(this.#queue.retentionS)) {
        warnIfRetentionShort(this.inbox.options.logger, {
          consumer: this.inbox.options.consumer,
          retentionMs: this.inbox.options.retentionMs,
          horizonMs: this.#queue.retentionS * 1000,
          source: `SQS queue ${this.options.queueUrl} (MessageRetentionPeriod)`,
        });
      }
      this.#settler.target = await this.#resolveDeadLetter(this.#queue, this.options.deadLetter);
    } catch (err) {
      this.#state = 'failed';
      throw err;
    }
    if (this.#state !== 'starting') return; // stop() was called meanwhile
    this.#state = 'running';
    if (this.options.heartbeat) {
      this.#heartbeat = setInterval(() => this.#beat(), this.options.heartbeatIntervalMs);
      this.#heartbeat.unref?.();
    }
    for (let i = 0; i < this.options.receivers; i++) this.#receivers.push(this.#receiveLoop());
  }

  /**
   * Graceful stop: no new receives (a long poll in flight is aborted), every message already
   * held is processed and settled, then the heartbeat ends. The client and pool stay open.
   */
  stop(): Promise<void> {
    if (this.#state === 'idle' || this.#state === 'stopped' || this.#state === 'failed') {
      this.#state = this.#state === 'idle' ? 'stopped' : this.#state;
      return Promise.resolve();
    }
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    this.#state = 'stopping';
    this.#abort.abort();
    for (const wake of this.#capacityWaiters.splice(0)) wake();
    await Promise.all(this.#receivers);
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    await this.#settler.drain();
    clearInterval(this.#heartbeat);
    this.#state = 'stopped';
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  health(): SqsConsumerHealth {
    return {
      state: this.#state,
      healthy:
        this.#state === 'running' &&
        this.#receiveErrors < this.options.unhealthyAfterErrors &&
        this.inbox.available,
      queueUrl: this.options.queueUrl,
      held: this.#held.size,
      running: this.#limiter.active,
      lastReceiveAt: this.#lastReceiveAt,
      consecutiveReceiveErrors: this.#receiveErrors,
      lastError: this.#lastError,
    };
  }

  // ---------------------------------------------------------------- start checks

  #checkIdSource(queue: QueueInfo): void {
    if (this.options.idFrom !== 'deduplication-id' || this.options.inbox.idOf) return;
    if (!queue.fifo) {
      throw new OnceError(
        SqsErrorCode.QueueMismatch,
        `idFrom 'deduplication-id' needs a FIFO queue; ${queue.url} is standard`,
      );
    }
    if (queue.contentBasedDeduplication) {
      throw new OnceError(
        SqsErrorCode.QueueMismatch,
        `idFrom 'deduplication-id' refused: ${queue.url} uses content-based deduplication, so the id is a hash of the ` +
          'body and two separate messages with the same body would collapse into one. Publish a message-id attribute ' +
          '(idFrom "attribute") or pass idOf',
      );
    }
  }

  async #resolveDeadLetter(queue: QueueInfo, option: DeadLetter | undefined): Promise<DeadLetterTarget> {
    if (option === 'discard') return 'discard';
    if (option === undefined || option === 'redrive') {
      if (queue.redrive) return 'redrive';
      throw new OnceError(
        option === undefined ? 'INVALID_OPTION' : SqsErrorCode.QueueMismatch,
        `options.deadLetter: ${queue.url} has no redrive policy, so failed messages have nowhere to go; pass ` +
          "{ queueUrl } of a dead-letter queue, configure a redrive policy, or pass 'discard'",
      );
    }
    const target = await queueInfo(this.options.client, option.queueUrl, 'deadLetter.queueUrl');
    return { url: target.url, fifo: target.fifo };
  }

  // ---------------------------------------------------------------- receiving

  async #receiveLoop(): Promise<void> {
    const o = this.options;
    let backoffMs = o.receiveBackoffMs;
    while (this.#state === 'running') {
      const want = await this.#reserve();
      if (want === 0) break;
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
        if (this.#state !== 'running') break;
        this.#receiveErrors++;
        this.#lastError = serializeError(err);
        this.#events.emit('receive:error', {
          error: this.#lastError,
          consecutive: this.#receiveErrors,
          backoffMs,
        });
        o.logger.warn('once/sqs: receive failed; retrying', {
          queueUrl: o.queueUrl,
          error: this.#lastError.message,
          backoffMs,
        });
        await this.#sleep(backoffMs);
        backoffMs = Math.min(backoffMs * 2, o.receiveBackoffMaxMs);
        continue;
      }
      this.#reserved -= want;
      this.#receiveErrors = 0;
      backoffMs = o.receiveBackoffMs;
      this.#lastReceiveAt = Date.now();
      this.#events.emit('received', {
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
      if (this.#state !== 'running') return 0;
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

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      const signal = this.#abort.signal;
      function done(): void {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }

  // ---------------------------------------------------------------- dispatch

  #dispatch(messages: Message[]): void {
    const now = performance.now();
    const fifo = this.#queue?.fifo ?? false;
    const lease = this.inbox.options.mode === 'lease';
    const entries: Held[] = [];
    for (const message of messages) {
      if (!message.ReceiptHandle) continue;
      const envelope = envelopeOf(message, this.options);
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
      // Lease mode: core's lease clock drives this message's visibility once it is claimed.
      if (lease) envelope.liveness = { extend: (ms) => this.#settler.lease(held, ms) };
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
          this.options.logger.error('once/sqs: a chain failed unexpectedly', { error: String(err) });
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
      this.options.logger.warn('once/sqs: keyOf threw; the message is batched without a key', {
        messageId: envelope.id,
        error: serializeError(err).message,
      });
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
        this.options.logger.warn('once/sqs: message held past maxHeldMs; no longer extended', {
          messageId: e.message.MessageId,
        });
        this.#events.emit('heartbeat:cap', { messageId: e.message.MessageId, heldMs });
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
  return new SqsConsumer(resolveSqsConsumerOptions(options));
}
