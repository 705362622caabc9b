import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Logger, Outcome } from '@once/core';
import {
  type DeadLetterPlan,
  deadLetteredEvent,
  logDropped,
  type ResolvedInboxOptions,
  type SettlePlan,
  serializeError,
  settlePlanOf,
  type TypedEmitter,
} from '@once/core/adapter';
import { sendToDeadLetter } from './dead-letter.js';
import { EntryBatcher, type EntryResult } from './entry-batcher.js';
import type { SqsConsumerEventMap } from './events.js';
import type { Held } from './held.js';

/**
 * Where failed messages go, resolved at start: a queue once copies them to, the queue's redrive
 * policy (`redrive`: its dead-letter target's ARN), or nowhere (`discard`: deleted and logged).
 */
export type DeadLetterTarget = { url: string; fifo: boolean } | { redrive: string } | 'discard';

const MAX_VISIBILITY_S = 43_200;

/** Milliseconds to the whole seconds SQS takes for visibility, within 0–43200. */
export const toSeconds = (ms: number): number =>
  Math.min(MAX_VISIBILITY_S, Math.max(0, Math.ceil(ms / 1000)));

interface SettlerDeps {
  client: SQSClient;
  queueUrl: string;
  /** What core's settle plans need of the inbox's options (`inbox.options`). */
  settleContext: Pick<ResolvedInboxOptions, 'consumer' | 'recordFailed'>;
  /** The id attribute: first among the originals a dead-letter copy carries. */
  idHeader: string;
  /** See `settleLingerMs`. */
  lingerMs: number;
  logger: Logger;
  events: TypedEmitter<SqsConsumerEventMap>;
  /** Records an error the consumer handled itself (the kit's `error` event and `lastError`). */
  noteError: (where: string, err: unknown) => void;
  /** Redelivery delay for a failed dead-letter send, in ms. */
  retryDelayMs: (attempt: number) => number;
  /** Called once a held message needs nothing more from us. */
  forget: (e: Held) => void;
  /** Registers background work that stop() must wait for. */
  track: (p: Promise<unknown>) => void;
}

/**
 * Turns outcomes into broker actions, always after the commit: DeleteMessageBatch for acks,
 * ChangeMessageVisibility for retries and releases, a dead-letter send then a delete for
 * failures. Per-entry failures of batch calls are logged and emitted, never thrown: a failed
 * delete only means a later duplicate.
 */
export class Settler {
  readonly #d: SettlerDeps;
  readonly #deleter: EntryBatcher<{ ReceiptHandle: string }>;
  readonly #visibility: EntryBatcher<{ ReceiptHandle: string; VisibilityTimeout: number }>;
  /** Set by start() once the policy is checked. */
  target: DeadLetterTarget = 'discard';

  constructor(deps: SettlerDeps) {
    this.#d = deps;
    const { client, queueUrl } = deps;
    const batching = { lingerMs: deps.lingerMs };
    this.#deleter = new EntryBatcher(
      (Entries) => client.send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries })),
      batching,
    );
    this.#visibility = new EntryBatcher(
      (Entries) => client.send(new ChangeMessageVisibilityBatchCommand({ QueueUrl: queueUrl, Entries })),
      batching,
    );
  }

  /** Core's settle plan for an outcome. */
  planOf(outcome: Outcome): SettlePlan {
    return settlePlanOf(outcome, this.#d.settleContext);
  }

  /**
   * Carries out core's plan ({@link planOf}): delete, delay, or dead-letter. A `rerun` the caller
   * did not take back is made visible again at once. Returns nothing, or for a dead letter a
   * promise that resolves once the dead letter is sent (the rest settle at once: no promise per
   * message). With `acks`, an ack is let go of and collected there instead of queued for
   * deletion: the caller deletes them together with {@link deleteAll} (a FIFO chain, see runChain).
   */
  settle(e: Held, plan: SettlePlan, acks?: Held[]): Promise<void> | undefined {
    e.settling = true;
    if (plan.kind === 'ack') {
      if (acks) {
        this.#d.forget(e);
        acks.push(e);
      } else this.delete(e);
    } else if (plan.kind === 'retry') this.delay(e, plan.delayMs, 'retry');
    else if (plan.kind === 'rerun') this.delay(e, 0, 'retry');
    else return this.#deadLetter(e, plan);
    return undefined;
  }

  delete(e: Held): void {
    e.settling = true;
    // Its slot frees now, not when the batch call returns: the call waits up to `lingerMs` for
    // company, and nothing more is asked of this message. stop() still waits for the call
    // (drain() waits for the batcher's calls in flight).
    this.#d.forget(e);
    this.#deleter.queue({ ReceiptHandle: e.receipt }, this.#deleted, e);
  }

  /** Deletes acks collected by {@link settle} (already let go of), in as few calls as they fit. */
  deleteAll(entries: readonly Held[]): void {
    for (const e of entries) this.#deleter.queue({ ReceiptHandle: e.receipt }, this.#deleted, e);
  }

  /** A delete's result (one function for every message, not a closure each). */
  readonly #deleted = (r: EntryResult, e: Held): void => {
    if (r.ok) return;
    // The commit stands; the redelivery will be a duplicate and deleted then.
    this.#d.logger.warn(
      {
        messageId: e.message.MessageId,
        code: r.code,
      },
      'once/sqs: delete after commit failed; the redelivery will be a duplicate',
    );
    this.#d.events.emit('delete:failed', {
      messageId: e.message.MessageId,
      code: r.code,
      message: r.message,
    });
  };

  /** Makes the message visible again after `delayMs` (0: now) and lets go of it. */
  delay(e: Held, delayMs: number, purpose: string): void {
    e.settling = true;
    this.#d.forget(e);
    // A lease extension still in flight must not land after this change and undo the delay.
    const after = e.extending ?? Promise.resolve();
    this.#d.track(
      after
        .then(() => this.#visibility.add({ ReceiptHandle: e.receipt, VisibilityTimeout: toSeconds(delayMs) }))
        .then((r) => {
          if (!r.ok) this.#visibilityFailed(e, r, purpose);
        }),
    );
  }

  /**
   * Lease mode (`envelope.liveness.extend`): keeps the message invisible for `ms` from now, in
   * whole seconds (at most 43200), with its own ChangeMessageVisibility call: core's lease clock
   * calls this at the claim and at every renewal, so it must not wait for a batch to fill.
   * Rejects when SQS refuses (core logs it); does nothing once the message is being settled.
   */
  lease(e: Held, ms: number): Promise<void> {
    e.leased = true;
    if (e.settling) return Promise.resolve();
    const sent = this.#d.client
      .send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: this.#d.queueUrl,
          ReceiptHandle: e.receipt,
          VisibilityTimeout: Math.max(1, toSeconds(ms)),
        }),
      )
      .then(
        () => {
          e.extendedAt = performance.now();
        },
        (err: unknown) => {
          const error = serializeError(err);
          if (!e.settling)
            this.#visibilityFailed(e, { ok: false, code: error.name, message: error.message }, 'lease');
          throw err;
        },
      );
    const settled = sent.catch(() => {});
    // Every extension in flight, not only the latest: two requests may land in either order.
    const before = e.extending;
    e.extending = before ? Promise.all([before, settled]).then(() => {}) : settled;
    this.#d.track(settled);
    return sent;
  }

  /** Heartbeat: keeps a held message invisible for `seconds` more. */
  extend(e: Held, seconds: number): void {
    void this.#visibility.add({ ReceiptHandle: e.receipt, VisibilityTimeout: seconds }).then((r) => {
      if (!r.ok && !e.settling) this.#visibilityFailed(e, r, 'heartbeat');
    });
  }

  /**
   * A chain (a FIFO group's run) ended: send its deletes and visibility changes now. The group
   * stays locked at SQS until every message of it in flight is deleted, so waiting longer for
   * fuller calls would only hold the group.
   */
  flush(): void {
    this.#deleter.flushSoon();
    this.#visibility.flushSoon();
  }

  /** Waits for every batch call in flight. */
  async drain(): Promise<void> {
    await this.#deleter.drain();
    await this.#visibility.drain();
  }

  #visibilityFailed(e: Held, r: EntryResult & { ok: false }, purpose: string): void {
    this.#d.logger.warn(
      {
        messageId: e.message.MessageId,
        purpose,
        code: r.code,
      },
      'once/sqs: visibility change failed',
    );
    this.#d.events.emit('visibility:failed', {
      messageId: e.message.MessageId,
      code: r.code,
      message: r.message,
      purpose,
    });
  }

  async #deadLetter(e: Held, plan: DeadLetterPlan): Promise<void> {
    const messageId = e.message.MessageId;
    const target = this.target;
    const done = (deadLetter: string | undefined) =>
      this.#d.events.emit('message:dead-lettered', deadLetteredEvent(plan, deadLetter));
    if (target === 'discard') {
      logDropped(this.#d.logger, plan, { name: 'once/sqs', action: 'deleted', fields: { messageId } });
      done(undefined);
      this.delete(e);
      return;
    }
    if ('redrive' in target) {
      // Visible again at once: each receive counts, and the redrive policy moves it at maxReceiveCount.
      done(target.redrive);
      this.delay(e, 0, 'redrive');
      return;
    }
    try {
      await sendToDeadLetter(this.#d.client, target, e.message, plan.record, this.#d.idHeader);
    } catch (err) {
      // Not sent, so not deleted: it comes back, is `failed` again, and is sent again.
      this.#d.logger.warn(
        {
          messageId,
          error: serializeError(err).message,
        },
        'once/sqs: dead-letter send failed; will retry',
      );
      this.#d.noteError('dead-letter', err);
      this.delay(e, this.#d.retryDelayMs(e.envelope.attempt), 'dead-letter retry');
      return;
    }
    done(target.url);
    this.delete(e);
  }
}
