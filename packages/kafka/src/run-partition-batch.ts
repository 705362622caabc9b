import type { Envelope, Liveness, Logger, Outcome, ProcessOptions } from '@once/core';
import {
  type DeadLetterPlan,
  deadLetteredEvent,
  type Gate,
  type ResolvedInboxOptions,
  type SettlePlan,
  type StartBudgets,
  serializeError,
  settlePlanOf,
  sleep,
  type TypedEmitter,
} from '@once/core/adapter';
import type { ClientMessage, PartitionBatch } from './client/types.js';
import { envelopeOf, type MappedMessage } from './envelope-of.js';
import type { KafkaConsumerEventMap } from './events.js';
import type { ResolvedKafkaConsumerOptions } from './options.js';
import { attemptOf, type PartitionState } from './partition-state.js';
import { decodeMarker, encodeMarker, type ReplayMarker } from './replay-marker.js';
import { planSettle } from './settle-plan.js';

/** The inbox calls the runner makes. */
export interface InboxLike {
  /** What core's settle plans need of the inbox's options. */
  readonly options: Pick<ResolvedInboxOptions, 'consumer' | 'recordFailed'>;
  process(envelope: Envelope, options?: ProcessOptions): Promise<Outcome>;
  processBatch(envelopes: readonly Envelope[], options?: ProcessOptions): Promise<Outcome[]>;
  notRun(envelopes: readonly Envelope[]): Outcome[];
  /**
   * Notes in PostgreSQL, committed on its own, the last offset of the range about to run on a
   * partition (`Inbox.noteInflight`): the replay marker of a client without commit metadata.
   */
  noteInflight(stream: string, partition: number, endOffset: string): Promise<void>;
  /** The end {@link InboxLike.noteInflight} last noted for a partition, or null (`Inbox.inflightEnd`). */
  inflightEnd(stream: string, partition: number): Promise<string | null>;
}

/** What {@link runPartitionBatch} needs from the consumer that owns it. */
export interface PartitionBatchDeps {
  options: ResolvedKafkaConsumerOptions;
  inbox: InboxLike;
  /** The inbox's redelivery delay for attempt n, in ms. */
  retryDelayMs: (attempt: number) => number;
  /**
   * The inbox runs in lease mode: each envelope is made with a `liveness` whose `extend` calls
   * this batch's `heartbeat()`, so core's lease clock also keeps the group session alive.
   * @default false
   */
  lease?: boolean;
  logger: Logger;
  events: TypedEmitter<KafkaConsumerEventMap>;
  state(topic: string, partition: number): PartitionState;
  /** The current group generation (counts joins). */
  generation(): number;
  /** False once a rebalance gave the partition to another member. */
  owns(topic: string, partition: number): boolean;
  isStopping(): boolean;
  /** False while the database or once's schema cannot be used: take nothing, hold the partition. */
  isFetching(): boolean;
  /**
   * The consumer's database hold, decided once for every path (the adapter kit's lifecycle,
   * `holdIfUnavailable`): `err`, from a statement of once's own before a slice (the replay
   * marker's note), says the database or once's schema cannot be used. True: the consumer now
   * holds every partition ({@link PartitionBatchDeps.isFetching} is false) and probes until it is
   * back. False: `err` is another fault.
   */
  holdForDatabase(err: unknown): boolean;
  /** The group's committed offset metadata for a partition (read once per assignment). */
  committedMetadata(topic: string, partition: number): Promise<string | null>;
  /** Sends a dead-letter copy; resolves once Kafka acknowledged it (or when dead-lettering is off). */
  deadLetter(topic: string, partition: number, message: ClientMessage, plan: DeadLetterPlan): Promise<void>;
  /**
   * Pauses the partition and seeks back to `offset`; resumes it after `delayMs`, or, without a
   * delay, when the consumer fetches again (the database is back).
   */
  retryLater(topic: string, partition: number, offset: string, delayMs?: number): void;
  /**
   * One gate for the whole consumer, across its partitions: fresh slices run shared, each message
   * of a crashed range exclusive, so when one of those kills the process nothing else was running.
   */
  gate: Gate;
  /**
   * The killer budget's call options: a message of a crashed range runs alone with `suspect`, and
   * the inbox counts its start in Postgres just before its handler (past `maxAttempts`, it is
   * refused).
   */
  starts: StartBudgets<unknown>;
  /** True for the client's "generation over" errors ({@link KafkaClient.isOwnershipLost}). */
  isOwnershipLost(err: unknown): boolean;
  /**
   * The client carries offset-commit metadata (the replay marker's home). Without it, the marker
   * is a PostgreSQL row ({@link InboxLike.noteInflight}) noted before every slice, after the
   * progress commit; on assignment {@link InboxLike.inflightEnd} says what a dead consumer had in
   * flight. @default true
   */
  commitMetadata?: boolean;
}

/** How many messages a step settled, or why the loop over a batch must end. */
type Step = number | 'lost' | 'paused';

/**
 * What settling a run gives back: a {@link Step}, or `waited`, the messages settled before a
 * message whose retry delay was just waited out in place (it runs again next, as the next attempt).
 */
type Settled = Step | { waited: number };

/**
 * Processes one batch of one partition, effectively once. Offsets are resolved and
 * committed only after the Postgres transaction that covered them committed, and only for the
 * contiguous prefix of settled messages. Returns normally except when the member lost its
 * generation: then it throws the client's error so the client rejoins the group.
 */
export async function runPartitionBatch(deps: PartitionBatchDeps, payload: PartitionBatch): Promise<void> {
  const run = new BatchRun(deps, payload);
  await run.run();
}

/** One eachBatch call; a class only to keep its shared state in one place. */
class BatchRun {
  readonly #deps: PartitionBatchDeps;
  readonly #payload: PartitionBatch;
  readonly #topic: string;
  readonly #partition: number;
  readonly #state: PartitionState;
  #lost: unknown;
  /** Offset after the settled prefix, not yet committed to Kafka. */
  #pending: string | undefined;
  /** The next offset to read: after the settled prefix. */
  #next: string | undefined;
  /** When this eachBatch call began (performance.now()), for `maxBatchMs`. */
  #started = 0;
  /**
   * Lease mode: the liveness every envelope of this batch is made with. One clock: every lease
   * renewal of a message of this batch is a heartbeat of its session. kafkajs throttles
   * heartbeat() to heartbeatInterval; #beat never rejects (it records a lost generation, which
   * ends the batch, and reports other errors).
   */
  readonly #liveness: Liveness | undefined;

  constructor(deps: PartitionBatchDeps, payload: PartitionBatch) {
    this.#deps = deps;
    this.#payload = payload;
    this.#topic = payload.topic;
    this.#partition = payload.partition;
    this.#state = deps.state(this.#topic, this.#partition);
    this.#liveness = deps.lease ? { extend: () => this.#beat() } : undefined;
  }

  async run(): Promise<void> {
    const batch = this.#payload;
    if (batch.messages.length === 0) return;
    if (!this.#deps.isFetching()) {
      // Fetched before the consumer paused for the database: read it again once it is back.
      this.#deps.retryLater(this.#topic, this.#partition, batch.messages[0]!.offset);
      return;
    }
    const { heartbeatIntervalMs } = this.#deps.options;
    // Heartbeats while a slice runs: a long transaction must not cost the membership (K3).
    const timer = setInterval(() => void this.#beat(), Math.max(100, Math.floor(heartbeatIntervalMs / 2)));
    timer.unref?.();
    this.#started = performance.now();
    try {
      await this.#runMessages();
    } catch (err) {
      // Never let a fault of ours crash the client: read the partition again later.
      this.#emitError('batch', err);
      const from = this.#next ?? batch.messages[0]!.offset;
      if (!this.#lost) this.#backoff(from);
    } finally {
      clearInterval(timer);
    }
    if (this.#lost) throw this.#lost;
  }

  async #runMessages(): Promise<void> {
    await this.#loadReplay();
    const messages = this.#payload.messages;
    let i = 0;
    while (i < messages.length) {
      if (this.#shouldStop()) break;
      if (i > 0 && this.#overTime()) break;
      const first = messages[i]!;
      const replay = this.#state.replay;
      let step: Step;
      if (replay && BigInt(first.offset) <= replay.end) {
        step = await this.#runAlone(first);
      } else {
        this.#state.replay = undefined;
        step = await this.#runSlice(messages.slice(i, i + this.#deps.options.batchSize));
      }
      if (typeof step !== 'number') break;
      i += step;
    }
    if (this.#pending !== undefined && !this.#lost) await this.#commit(this.#pending, null);
    // Paused for the database mid-batch: the rest is read again once it is back.
    const rest = messages[i];
    if (rest && !this.#lost && !this.#deps.isFetching())
      this.#deps.retryLater(this.#topic, this.#partition, rest.offset);
  }

  /** `maxBatchMs` has passed since this eachBatch call began: no new slice starts. */
  #overTime(): boolean {
    return performance.now() - this.#started >= this.#deps.options.maxBatchMs;
  }

  #shouldStop(): boolean {
    return (
      this.#lost !== undefined ||
      !this.#payload.isRunning() ||
      this.#payload.isStale() ||
      this.#deps.isStopping() ||
      !this.#deps.isFetching() ||
      !this.#deps.owns(this.#topic, this.#partition)
    );
  }

  async #beat(): Promise<void> {
    try {
      await this.#payload.heartbeat();
    } catch (err) {
      if (this.#deps.isOwnershipLost(err)) this.#lost ??= err;
      else this.#emitError('heartbeat', err);
    }
  }

  /** Reads the replay marker once per assignment: did a consumer die with offsets in flight? */
  async #loadReplay(): Promise<void> {
    const deps = this.#deps;
    const generation = deps.generation();
    if (!deps.options.crashReplay || this.#state.checkedGeneration === generation) return;
    this.#state.checkedGeneration = generation;
    const batch = this.#payload;
    const firstOffset = BigInt(batch.messages[0]!.offset);
    let marker: ReplayMarker | undefined;
    if (deps.commitMetadata === false) {
      // The marker is a PostgreSQL row, noted before every slice (#runSlice).
      let end: string | null;
      try {
        end = await deps.inbox.inflightEnd(this.#topic, this.#partition);
      } catch (err) {
        // Without the row, be safe: progress is committed before every slice, so a dead consumer
        // had at most one slice in flight from the committed offset. The first `batchSize`
        // messages run one at a time with their starts counted, the rest as usual.
        this.#emitError('read-replay-marker', err);
        const bound = batch.messages[Math.min(deps.options.batchSize, batch.messages.length) - 1]!;
        this.#state.replay = { end: BigInt(bound.offset) };
        return;
      }
      marker = end === null ? undefined : { end };
    } else {
      let metadata: string | null;
      try {
        metadata = await deps.committedMetadata(this.#topic, this.#partition);
      } catch (err) {
        // Without the marker, be safe: run this whole first batch one message per transaction.
        this.#emitError('read-replay-marker', err);
        this.#state.replay = { end: BigInt(batch.lastOffset()) };
        return;
      }
      marker = decodeMarker(metadata);
    }
    if (!marker || BigInt(marker.end) < firstOffset) {
      this.#state.replay = undefined;
      return;
    }
    this.#state.replay = { end: BigInt(marker.end) };
    deps.logger.warn(
      {
        topic: this.#topic,
        partition: this.#partition,
        from: String(firstOffset),
        to: marker.end,
      },
      'once/kafka: a previous consumer stopped with offsets in flight; replaying them one by one',
    );
    deps.events.emit('partition:replay', {
      topic: this.#topic,
      partition: this.#partition,
      fromOffset: String(firstOffset),
      toOffset: marker.end,
    });
  }

  /**
   * A fresh slice: one transaction (batch mode) or one per message, offsets after. In message mode
   * a retry waited out in place (`inlineRetryMaxMs`) does not end the slice: the retried message
   * runs again as its next attempt and the slice goes on from it, under the same marker, its later
   * messages neither mapped again nor reported `not-run` (they never left; they run after it).
   */
  async #runSlice(slice: readonly ClientMessage[]): Promise<Step> {
    const deps = this.#deps;
    const last = slice[slice.length - 1]!;
    const marker =
      deps.options.crashReplay && deps.commitMetadata !== false ? encodeMarker({ end: last.offset }) : null;
    if (marker !== null) {
      // Durably note the range before it runs; this commit also records the progress so far.
      if (!(await this.#commit(slice[0]!.offset, marker))) return this.#commitFailed(slice[0]!);
    } else if (deps.options.crashReplay) {
      // No commit metadata: the slice's first offset is committed first (the progress so far; a
      // member whose generation is over is refused there and notes nothing), then the range is
      // noted in PostgreSQL, durable before it runs. A crash leaves [committed offset .. noted
      // end], exactly this slice, for the next owner. Nothing runs unnoted: a note the database
      // refused holds the consumer as a message the inbox could not run does (the consumer no
      // longer fetches, so #runMessages seeks back to this slice, read again once the hold ends:
      // no backoff, no attempt counted); any other failure backs the partition off.
      if (!(await this.#commit(slice[0]!.offset, null))) return this.#commitFailed(slice[0]!);
      const noted = await this.#noteInflight(last.offset);
      if (noted === 'held') return 'paused';
      if (noted === 'failed') return this.#commitFailed(slice[0]!);
    }
    let mapped = slice.map((m) => this.#mapFresh(m));
    let settled = 0;
    for (;;) {
      const started = performance.now();
      const leave = await deps.gate.shared();
      let plans: (SettlePlan | undefined)[];
      try {
        plans = await this.#process(mapped);
      } finally {
        leave();
      }
      // Batch mode ends the slice after a wait: the rest is a fresh slice (a new transaction).
      const step = await this.#settle(mapped, plans, started, deps.options.batch ? null : marker);
      if (typeof step !== 'object') return typeof step === 'number' ? settled + step : step;
      settled += step.waited;
      if (deps.options.batch || this.#shouldStop() || this.#overTime()) return settled;
      mapped = mapped.slice(step.waited);
      mapped[0] = this.#mapFresh(mapped[0]!.message);
    }
  }

  /** A message of a fresh slice, as the attempt the partition's retry state says. */
  #mapFresh(message: ClientMessage): MappedMessage {
    const attempt = attemptOf(this.#state, message.offset);
    return this.#map(message, attempt, attempt > 1);
  }

  /**
   * A message a dead consumer had in flight: alone in its transaction and alone in the whole
   * consumer (no other partition runs anything meanwhile), its start counted in Postgres first.
   * Only the message that kills the process sees its count rise with each death; its neighbours,
   * of this partition or another, complete when they run. Past `maxAttempts` starts it is not run.
   */
  async #runAlone(message: ClientMessage): Promise<Step> {
    const deps = this.#deps;
    const replay = this.#state.replay!;
    // The range stays noted while it is replayed: this commit also records the progress so far.
    const marker = deps.commitMetadata === false ? null : encodeMarker({ end: replay.end.toString() });
    if (!(await this.#commit(message.offset, marker))) return this.#commitFailed(message);
    const leave = await deps.gate.exclusive();
    let plans: (SettlePlan | undefined)[];
    const started = performance.now();
    const mapped = this.#map(message, attemptOf(this.#state, message.offset), true);
    try {
      plans = await this.#process([mapped], deps.starts.suspect);
    } finally {
      leave();
    }
    const step = await this.#settle([mapped], plans, started, null);
    return typeof step === 'object' ? step.waited : step;
  }

  #map(message: ClientMessage, attempt: number, redelivered: boolean): MappedMessage {
    const o = this.#deps.options;
    return envelopeOf(message, {
      topic: this.#topic,
      partition: this.#partition,
      groupId: o.groupId,
      idHeader: o.idHeader,
      idFrom: o.idFrom,
      attempt,
      redelivered,
      liveness: this.#liveness,
    });
  }

  /**
   * Runs the inbox and gives core's settle plan for each message; a message without an outcome
   * (the inbox threw, the generation ended) has none (undefined). `call`: the inbox's call options
   * (the start budget of a delivery that runs alone).
   */
  async #process(mapped: MappedMessage[], call?: ProcessOptions): Promise<(SettlePlan | undefined)[]> {
    const { inbox, options } = this.#deps;
    const envelopes = mapped.map((m) => m.envelope);
    const results: SettlePlan[] = [];
    try {
      if (options.batch && envelopes.length > 1) {
        for (const o of await inbox.processBatch(envelopes, call))
          results.push(settlePlanOf(o, inbox.options));
      } else {
        for (const envelope of envelopes) {
          // The generation ended (a heartbeat said so): the partition may be another member's now.
          if (this.#lost) break;
          const plan = settlePlanOf(await inbox.process(envelope, call), inbox.options);
          results.push(plan);
          // Core says run it (or what follows) again: the rest of the slice waits behind it,
          // without a plan (#settle reports them not run if they are to be read again).
          if (plan.kind === 'retry' || plan.kind === 'rerun') break;
        }
      }
    } catch (err) {
      // The inbox throws only for setup faults (schema missing or too new): retry later, loudly.
      this.#deps.logger.error({ error: String(err) }, 'once/kafka: the inbox cannot process messages');
      this.#emitError('inbox', err);
    }
    return mapped.map((_, k) => results[k]);
  }

  /**
   * Dead-letters, resolves and commits the settled prefix; schedules the retry of the rest: waited
   * out in place when short (`{ waited }`), else the partition paused and sought back. `marker`:
   * the replay marker the run goes on under after a wait in place (kept in the progress commit
   * before it); null clears the marker for the wait.
   */
  async #settle(
    mapped: MappedMessage[],
    plans: (SettlePlan | undefined)[],
    started: number,
    marker: string | null,
  ): Promise<Settled> {
    const deps = this.#deps;
    const plan = planSettle(plans, mapped.length);
    let prefix = plan.prefix;
    let retryDelay: number | undefined;
    let retryAttempt = 0;
    /** The message to run again was not run because its database cannot be used. */
    let held = false;
    for (const k of plan.deadLetter) {
      const m = mapped[k]!;
      const dead = plans[k] as DeadLetterPlan;
      try {
        await deps.deadLetter(this.#topic, this.#partition, m.message, dead);
      } catch (err) {
        // Not dead-lettered, so not settled: the redelivery is `failed` again and goes again.
        this.#emitError('dead-letter', err);
        prefix = k;
        retryAttempt = m.envelope.attempt;
        retryDelay = this.#faultDelay();
        break;
      }
      deps.events.emit(
        'message:dead-lettered',
        deadLetteredEvent(dead, deps.options.deadLetterTopicOf(this.#topic)),
      );
    }
    if (retryDelay === undefined && plan.retryAt !== undefined) {
      const retry = plan.retry;
      const env = mapped[plan.retryAt]!.envelope;
      // Core's plan says when, and as which attempt: raised only when the failure was the
      // message's own (not a database fault, a lost commit, a wait bound, a neighbour not run).
      // A rerun (a neighbour before it stopped) runs at once as the same attempt; a message
      // without a plan (it never reached the inbox) after the fault backoff.
      retryAttempt = (retry?.kind === 'retry' ? retry.attempt : env.attempt) - 1;
      retryDelay = retry === undefined ? this.#faultDelay() : retry.kind === 'retry' ? retry.delayMs : 0;
      held = retry?.kind === 'retry' && retry.outcome === 'not-run';
      if (retry?.kind === 'retry' && retry.failure) {
        deps.events.emit('partition:retry', {
          topic: this.#topic,
          partition: this.#partition,
          offset: env.source.offset!,
          attempt: env.attempt,
          delayMs: retryDelay,
          error: retry.failure,
        });
      }
    }
    if (prefix > 0) {
      const last = mapped[prefix - 1]!.message;
      this.#payload.resolveOffset(last.offset);
      this.#pending = (BigInt(last.offset) + 1n).toString();
      this.#next = this.#pending;
      if (this.#state.retry && BigInt(this.#state.retry.offset) <= BigInt(last.offset))
        this.#state.retry = undefined;
      this.#state.faults = 0;
      deps.events.emit('slice:done', {
        topic: this.#topic,
        partition: this.#partition,
        firstOffset: mapped[0]!.message.offset,
        lastOffset: last.offset,
        messages: prefix,
        durationMs: performance.now() - started,
      });
    }
    if (retryDelay === undefined) return prefix;
    const at = mapped[prefix]!.message.offset;
    this.#state.retry = { offset: at, attempt: Math.max(0, retryAttempt) };
    // A message whose database cannot be used (`not-run`, over several databases while the others
    // can) is never waited for in place: the wait would repeat for as long as that database is
    // away, and kafkajs fetches the partitions of a broker again only once every batch of the last
    // fetch is over, so the other partitions (and databases) would wait with it. The partition is
    // paused and sought back instead; the others go on.
    const inline = retryDelay <= deps.options.inlineRetryMaxMs && !held && !this.#deps.isStopping();
    // Commit the progress. The in-flight marker is cleared when nothing runs while the partition
    // waits; kept when the run goes on under it after a wait in place.
    if (!this.#lost) await this.#commit(this.#pending ?? at, inline ? marker : null);
    this.#pending = undefined;
    if (this.#lost) return 'lost';
    if (inline) {
      // A short wait in place (heartbeats go on) is cheaper than a pause, a seek and a refetch.
      await sleep(retryDelay);
      return { waited: prefix };
    }
    // Read again after the pause: the messages that waited behind the retried one without
    // running are reported not run (batch mode: the inbox already did).
    const behind = plans[prefix] ? mapped.slice(prefix + 1).filter((_, j) => !plans[prefix + 1 + j]) : [];
    if (behind.length > 0) deps.inbox.notRun(behind.map((m) => m.envelope));
    deps.retryLater(this.#topic, this.#partition, at, retryDelay);
    return 'paused';
  }

  /** Commits `offset` (the next to read) with metadata; false if it did not happen. */
  async #commit(offset: string, metadata: string | null): Promise<boolean> {
    if (this.#lost || !this.#deps.owns(this.#topic, this.#partition)) return false;
    try {
      await this.#payload.commit(offset, metadata);
      if (this.#pending === offset) this.#pending = undefined;
      return true;
    } catch (err) {
      if (this.#deps.isOwnershipLost(err)) this.#lost ??= err;
      else this.#emitError('commit', err);
      return false;
    }
  }

  /**
   * Notes the range's end in PostgreSQL (no commit metadata). `held`: it did not happen because
   * the database or once's schema cannot be used, and the consumer holds for it (the same hold as
   * a message the inbox could not run); `failed`: it did not happen for another reason.
   */
  async #noteInflight(end: string): Promise<'noted' | 'held' | 'failed'> {
    try {
      await this.#deps.inbox.noteInflight(this.#topic, this.#partition, end);
      return 'noted';
    } catch (err) {
      // The hold reports itself (consumer:paused, health's lastError); anything else is an error.
      if (this.#deps.holdForDatabase(err)) return 'held';
      this.#emitError('note-replay-marker', err);
      return 'failed';
    }
  }

  /**
   * A commit (or the note of a range, for another reason than the database hold) before a run
   * failed: nothing ran, read from `message` again after a backoff.
   */
  #commitFailed(message: ClientMessage): Step {
    if (this.#lost || !this.#deps.owns(this.#topic, this.#partition)) return 'lost';
    this.#backoff(message.offset);
    return 'paused';
  }

  #backoff(offset: string): void {
    this.#deps.retryLater(this.#topic, this.#partition, offset, this.#faultDelay());
  }

  #faultDelay(): number {
    this.#state.faults += 1;
    return Math.max(0, Math.floor(this.#deps.retryDelayMs(this.#state.faults)));
  }

  #emitError(where: string, err: unknown): void {
    this.#deps.events.emit('error', {
      where,
      error: serializeError(err),
      topic: this.#topic,
      partition: this.#partition,
    });
  }
}
