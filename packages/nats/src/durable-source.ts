import {
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type Consumer as JsConsumer,
  type JsMsg,
  jetstream,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger, PgPoolLike } from '@once/core';
import type { Placed } from './envelope-of.js';
import { LegacyGeneration } from './legacy-generation.js';
import type { ResolvedNatsConsumerOptions } from './options.js';
import { durableGone, type Setup, setUp } from './setup.js';

/** A pull handed back unprocessed comes back after this delay, in ms. */
const HAND_BACK_MS = 1_000;

/** What a {@link DurableSource} needs from its consumer. */
export interface DurableSourceContext {
  nc: NatsConnection;
  jsm: JetStreamManager;
  options: ResolvedNatsConsumerOptions;
  handlerTimeoutMs: number;
  /** The inbox's: where the legacy generation's record is kept, and whether `idOf` names the ids. */
  inbox: { pool: PgPoolLike; schema: string; idOf: unknown; logger: Logger };
  noteError(where: string, err: unknown): void;
}

/**
 * The durable pull consumer the fetch loop reads, and what reading it safely takes:
 *
 * - when the durable is gone (deleted, or with its stream), that is noticed after a failed pull
 *   and reported (unhealthy, `NATS_CONSUMER_NOT_FOUND` or `NATS_STREAM_NOT_FOUND`); nothing is
 *   pulled until a set-up as at start (setup.ts) succeeds again: it finds the stream that captures
 *   the subject, a recreated one too, and makes the durable when `createConsumer` is on;
 * - with `idFrom: 'sequence'`, which messages keep bare sequence ids (legacy-generation.ts): read
 *   before the first pull, and checked for each pull while it matters.
 */
export class DurableSource {
  readonly #ctx: DurableSourceContext;
  readonly #js: JetStreamClient;
  #setup: Setup;
  #consumer: JsConsumer;
  readonly #legacy: LegacyGeneration | undefined;
  /** Why nothing can be pulled now (a gone durable, an unreadable record); undefined when it can. */
  #problem: unknown;
  #gone = false;

  private constructor(ctx: DurableSourceContext, setup: Setup, consumer: JsConsumer, js: JetStreamClient) {
    this.#ctx = ctx;
    this.#js = js;
    this.#setup = setup;
    this.#consumer = consumer;
    const { options: o, inbox } = ctx;
    this.#legacy =
      o.idFrom === 'sequence' && inbox.idOf === undefined
        ? new LegacyGeneration({
            pool: inbox.pool,
            schema: inbox.schema,
            consumer: o.consumer,
            logger: inbox.logger,
            jsm: () => ctx.jsm,
            stream: () => this.#setup.stream,
          })
        : undefined;
  }

  /** Sets up as at start (setup.ts); throws its named OnceErrors. */
  static async open(ctx: DurableSourceContext): Promise<DurableSource> {
    const setup = await setUp(ctx.nc, ctx.jsm, ctx.options, ctx.handlerTimeoutMs);
    const js = jetstream(ctx.nc);
    return new DurableSource(ctx, setup, await js.consumers.get(setup.stream, ctx.options.durable), js);
  }

  /** The JetStream client, for dead letters. */
  get js(): JetStreamClient {
    return this.#js;
  }

  get setup(): Setup {
    return this.#setup;
  }

  /** Why nothing can be pulled now; undefined when the source is fine. */
  get problem(): unknown {
    return this.#problem;
  }

  /**
   * Gets ready for a pull: sets up again after the durable was found gone, reads the legacy
   * generation's record before the first pull. False when it cannot yet (the reason noted, and
   * kept as {@link problem}): back off and ask again.
   */
  async ready(): Promise<boolean> {
    let where = 'consumer';
    try {
      if (this.#gone) await this.#setUpAgain();
      where = 'sequence-ids';
      if (this.#legacy && !this.#legacy.resolved) await this.#legacy.resolve();
      this.#problem = undefined;
      return true;
    } catch (err) {
      this.#problem = err;
      this.#ctx.noteError(where, err);
      return false;
    }
  }

  /** Starts a pull of up to `room` messages. */
  pull(room: number, expiresMs: number): Promise<ConsumerMessages> {
    return this.#consumer.fetch({ max_messages: room, expires: expiresMs });
  }

  /**
   * Hands a pull's messages to `take`, each with whether it keeps a bare sequence id. While the
   * legacy generation is the stream's current one, the stream is looked up once the pull's first
   * message has arrived; if it is another generation now, or the lookup fails, the pull's messages
   * may belong to either, and are handed back (nak) instead (legacy-generation.ts).
   */
  async place(pull: ConsumerMessages, take: (placed: Placed) => void, arrived: () => void): Promise<void> {
    let verdict: 'check' | 'legacy' | 'new' | 'refused' = this.#legacy?.live ? 'check' : 'new';
    for await (const m of pull) {
      arrived();
      if (verdict === 'check') verdict = await this.#check();
      if (verdict === 'refused') this.#handBack(m);
      else take({ m, legacy: verdict === 'legacy' });
    }
  }

  /** Looks at a pull of the legacy generation; a failed lookup is a problem until the next pull. */
  async #check(): Promise<'legacy' | 'refused'> {
    try {
      return (await this.#legacy!.checkPull()) ? 'legacy' : 'refused';
    } catch (err) {
      this.#problem = err;
      this.#ctx.noteError('stream', err);
      return 'refused';
    }
  }

  /** After a failed pull: is the durable (or its stream) gone? Then it is reported, and set up again by {@link ready}. */
  async pullFailed(): Promise<void> {
    const { jsm, options: o, inbox } = this.#ctx;
    const gone = await durableGone(jsm, this.#setup.stream, o);
    if (!gone) return;
    this.#gone = true;
    this.#problem = gone;
    this.#ctx.noteError('consumer', gone);
    inbox.logger.warn(
      { consumer: o.consumer, stream: this.#setup.stream, durable: o.durable },
      `once/nats: ${gone.message}`,
    );
  }

  /** A message that gets no id now: JetStream delivers it again shortly. */
  #handBack(m: JsMsg): void {
    try {
      m.nak(HAND_BACK_MS);
    } catch (err) {
      this.#ctx.noteError('nak', err);
    }
  }

  async #setUpAgain(): Promise<void> {
    const { nc, jsm, options: o, handlerTimeoutMs, inbox } = this.#ctx;
    const setup = await setUp(nc, jsm, o, handlerTimeoutMs);
    this.#consumer = await this.#js.consumers.get(setup.stream, o.durable);
    this.#setup = setup;
    this.#gone = false;
    inbox.logger.warn(
      { consumer: o.consumer, stream: setup.stream, durable: o.durable },
      `once/nats: durable consumer '${o.durable}' of stream '${setup.stream}' is there; fetching resumes`,
    );
  }
}
