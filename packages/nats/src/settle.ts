import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/transport-node';
import type { Envelope, Logger } from '@once/core';
import {
  DEAD_LETTER_RECORD,
  deadLetteredEvent,
  encodeDeadLetterRecord,
  logDropped,
  type SettlePlan,
  type TypedEmitter,
} from '@once/core/adapter';
import type { NatsConsumerEventMap } from './events.js';
import { deadLetterMsgId, storedAtOf } from './stored-message.js';

/** A message fetched and not yet settled. */
export interface Held {
  readonly m: JsMsg;
  readonly envelope: Envelope;
  /** Acked, naked or termed: no more `working()`. */
  done: boolean;
}

/** A dead letter whose publish failed comes back after this delay (nak), in ms. */
export const DEAD_LETTER_RETRY_MS = 1_000;
/** Header of a dead-letter copy holding the original's `Nats-Msg-Id` (the copy has its own). */
export const ORIGINAL_ID_HEADER = 'Once-Original-Msg-Id';
/** Header of a dead-letter copy holding the subject the original was consumed from. */
export const ORIGIN_SUBJECT_HEADER = 'Once-Origin-Subject';

/** What the settler needs from its consumer. */
export interface SettlerContext {
  consumer: string;
  durable: string;
  deadLetterSubject: string | false;
  events: TypedEmitter<NatsConsumerEventMap>;
  logger: Logger;
  /** The JetStream client and the stream, once started. */
  js: () => JetStreamClient;
  stream: () => string;
  noteError(where: string, err: unknown): void;
  /** The message left the consumer's hands (acked, naked or termed). */
  release(h: Held): void;
}

/**
 * Turns core's settle plans into JetStream's calls: `ack`; `nak(delay)` for a retry; for a dead
 * letter, a JetStream publish of the copy with its record (PubAck awaited), then `term()`. A
 * failed dead-letter publish naks the message, never terms it.
 */
export class Settler {
  readonly #ctx: SettlerContext;

  constructor(ctx: SettlerContext) {
    this.#ctx = ctx;
  }

  async settle(h: Held, plan: SettlePlan): Promise<void> {
    const c = this.#ctx;
    const deadLetter = c.deadLetterSubject === false ? undefined : c.deadLetterSubject;
    if (plan.kind === 'ack') {
      this.respond(h, 'ack');
    } else if (plan.kind === 'retry') {
      this.respond(h, 'nak', plan.delayMs);
    } else if (plan.kind === 'dead-letter') {
      if (deadLetter !== undefined) {
        try {
          await this.#publishDeadLetter(h, deadLetter, encodeDeadLetterRecord(plan.record));
        } catch (err) {
          // Never term a message whose copy is not known to be stored: it comes back instead.
          c.noteError('dead-letter', err);
          this.respond(h, 'nak', DEAD_LETTER_RETRY_MS);
          return;
        }
      }
      this.respond(h, 'term');
      if (deadLetter === undefined) {
        logDropped(c.logger, plan, {
          name: 'once/nats',
          action: 'termed',
          fields: {
            stream: c.stream(),
            durable: c.durable,
            subject: h.m.subject,
            sequence: h.m.info.streamSequence,
          },
          unrecorded: { headers: h.m.headers?.keys() ?? [] },
        });
      }
      c.events.emit('message:dead-lettered', deadLetteredEvent(plan, deadLetter));
    }
    c.events.emit('settled', { id: plan.id, status: plan.outcome, plan: plan.kind });
  }

  /** Acks, naks or terms; a closed connection refuses, and JetStream redelivers after `ack_wait`. */
  respond(h: Held, how: 'ack' | 'nak' | 'term', delayMs?: number): void {
    h.done = true;
    this.#ctx.release(h);
    try {
      if (how === 'ack') h.m.ack();
      else if (how === 'nak') h.m.nak(delayMs);
      else h.m.term();
    } catch (err) {
      this.#ctx.noteError(how, err);
    }
  }

  /** Publishes the copy with its record and waits for the PubAck. */
  async #publishDeadLetter(h: Held, subject: string, record: string): Promise<void> {
    const { m } = h;
    const headers = natsHeaders();
    for (const [name, values] of m.headers ?? []) {
      if (name === 'Nats-Msg-Id') continue;
      for (const v of values) headers.append(name, v);
    }
    const id = m.headers?.get('Nats-Msg-Id');
    if (id) headers.set(ORIGINAL_ID_HEADER, id);
    headers.set(ORIGIN_SUBJECT_HEADER, m.subject);
    headers.set(DEAD_LETTER_RECORD, record);
    // One copy per stored message, however often its dead-lettering is tried. Without a store
    // time (never, from JetStream) no msgID: a second copy beats a dropped one.
    const storedAt = storedAtOf(m);
    const msgID =
      storedAt === undefined
        ? undefined
        : deadLetterMsgId(this.#ctx.stream(), m.info.streamSequence, storedAt, this.#ctx.durable);
    await this.#ctx.js().publish(subject, m.data, msgID === undefined ? { headers } : { msgID, headers });
  }
}
