import type { JetStreamManager } from '@nats-io/jetstream';
import { createInbox, type Envelope, type Logger, OnceError, type PgPoolLike } from '@once/core';
import { consumerExists, findInboxRow } from '@once/core/admin';
import { NatsErrorCode } from './errors.js';
import { streamNotFound } from './setup.js';

/**
 * The one stream generation whose messages keep bare sequence ids, so that what earlier versions
 * of @once/nats recorded still counts after an upgrade.
 *
 * Earlier versions gave a stored message the id `<sequence>` with `idFrom: 'sequence'`; this one
 * gives it `<sequence>@<store time>` (stored-message.ts). A message processed under the bare id
 * would run again under the new one, and a process of the old version still running beside the new
 * ones in a rolling deploy would not wait on a new one's claim of the same message (nor it on the
 * old one's): the two ids are two rows. So the messages of the stream as it was when this version
 * first started for the consumer (the *legacy generation*: the stream's name and creation time)
 * keep their bare ids, whichever version processes them. Every other generation (the stream once
 * it is deleted and created again, or another stream) gets the new ids, which no message of
 * another generation can share. A consumer with no inbox rows at all when this version first
 * starts has nothing to keep: it has no legacy generation.
 *
 * Which generation that is gets decided once and recorded as an inbox row of the consumer
 * ({@link LEGACY_RECORD_ID}), through the inbox's own claim: the first process to record it wins,
 * every later one (and every restart) reads the same answer. It is kept for 1,000 years, not for
 * the consumer's retention: forgetting it would make the stream of the day the legacy generation.
 *
 * While the legacy generation is the stream's current one, a pull's messages get bare ids only
 * once the stream, looked up after the pull's first message arrived, is still that generation:
 * a pull is served by one durable, so all its messages belong to the generation that durable
 * belongs to, which existed when the stream was last looked up and exists now, so it existed in
 * between, when the pull was served. A pull that finds another generation (or none) is handed back
 * (nak) unprocessed: it may hold messages of either. From then on the legacy generation is gone
 * for good (a deleted stream never comes back), and nothing is looked up any more.
 */
export class LegacyGeneration {
  readonly #ctx: LegacyGenerationContext;
  /** What the record says; undefined until it is read (or made). */
  #record: LegacyRecord | undefined;
  /** The record names the stream's current generation, as last looked up. */
  #live = false;

  constructor(ctx: LegacyGenerationContext) {
    this.#ctx = ctx;
  }

  /** The record is read: messages can be given ids. */
  get resolved(): boolean {
    return this.#record !== undefined;
  }

  /** Each pull must be checked ({@link checkPull}) before its messages get ids. */
  get live(): boolean {
    return this.#live;
  }

  /**
   * Reads the record, or makes it from the stream's current generation (none for a consumer with
   * no inbox rows), and looks the stream up. Throws what PostgreSQL or JetStream threw.
   */
  async resolve(): Promise<void> {
    const c = this.#ctx;
    const stream = c.stream();
    const created = await this.#created(stream);
    const record = (await this.#read()) ?? (await this.#make(stream, created));
    this.#record = record;
    this.#live = created !== undefined && record.stream === stream && record.created === created;
    c.logger.info(
      { consumer: c.consumer, stream, legacy: record, current: this.#live },
      this.#live
        ? `once/nats: messages of stream '${stream}' as created at ${created} keep bare sequence ids (earlier versions' ids)`
        : `once/nats: sequence ids are <sequence>@<store time>`,
    );
  }

  /**
   * Called once a pull's first message has arrived: true when the stream is still the legacy
   * generation, so the pull's messages get bare ids; false when it is gone (for good: {@link live}
   * turns false) and the pull must be handed back. Throws when the stream cannot be looked up:
   * hand the pull back too.
   */
  async checkPull(): Promise<boolean> {
    const c = this.#ctx;
    const stream = c.stream();
    const created = await this.#created(stream);
    if (created !== undefined && created === this.#record?.created && stream === this.#record.stream)
      return true;
    this.#live = false;
    c.logger.warn(
      { consumer: c.consumer, stream, legacy: this.#record, created: created ?? null },
      `once/nats: stream '${stream}' is not the one whose messages kept bare sequence ids (it was deleted` +
        `${created === undefined ? '' : ' and created again'}): its messages get ids <sequence>@<store time>`,
    );
    return false;
  }

  /** The stream's creation time; undefined when it does not exist. */
  async #created(stream: string): Promise<string | undefined> {
    try {
      return (await this.#ctx.jsm().streams.info(stream)).created;
    } catch (err) {
      if (streamNotFound(err)) return undefined;
      throw err;
    }
  }

  async #read(): Promise<LegacyRecord | undefined> {
    const { pool, schema, consumer } = this.#ctx;
    const row = await findInboxRow(pool, schema, { consumer, messageId: LEGACY_RECORD_ID });
    return row === undefined ? undefined : recordOf(row.status === 'done' ? row.result : undefined, consumer);
  }

  async #make(stream: string, created: string | undefined): Promise<LegacyRecord> {
    const { pool, schema, consumer, logger } = this.#ctx;
    // Asked before the claim: inside its transaction the record's own row would count.
    const fresh = !(await consumerExists(pool, schema, consumer));
    const decided: LegacyRecord =
      fresh || created === undefined ? { stream: null, created: null } : { stream, created };
    const inbox = createInbox<LegacyRecord>({
      pool,
      schema,
      consumer,
      logger,
      storeResult: true,
      retentionMs: RECORD_RETENTION_MS,
      handler: () => decided,
    });
    const envelope: Envelope = {
      id: LEGACY_RECORD_ID,
      body: RECORD_BODY,
      headers: {},
      source: { broker: 'nats', queue: stream },
      attempt: 1,
      redelivered: false,
    };
    const outcome = await inbox.process(envelope);
    // Processed, or a duplicate (another process recorded it first: its answer is the one): the
    // two outcomes with a result. This is a record, not a delivery: nothing is settled.
    if ('result' in outcome) return recordOf(outcome.result, consumer);
    const cause = 'error' in outcome ? outcome.error : undefined;
    throw new OnceError(
      NatsErrorCode.SequenceIds,
      `could not record which stream generation keeps bare sequence ids for consumer '${consumer}'` +
        `${cause ? ` (${cause.message})` : ' (its id is held or recorded otherwise)'}; fetching waits and tries again`,
      { retryable: true, cause },
    );
  }
}

/** What {@link LegacyGeneration} needs from its consumer. */
export interface LegacyGenerationContext {
  pool: PgPoolLike;
  /** The schema's name, unquoted. */
  schema: string;
  /** The inbox consumer name. */
  consumer: string;
  logger: Logger;
  jsm(): JetStreamManager;
  /** The stream consumed, once set up. */
  stream(): string;
}

/**
 * The legacy generation as recorded: the stream's name and creation time (`StreamInfo.created`),
 * or both null for a consumer that has none.
 */
export interface LegacyRecord {
  readonly stream: string | null;
  readonly created: string | null;
}

/** The inbox row holding a consumer's {@link LegacyRecord}. No message id of `idFrom: 'sequence'` has a `:`. */
export const LEGACY_RECORD_ID = 'once-nats:bare-sequence-ids';
/** The record's body: its fingerprint must never change, or the claim would see a conflict. */
const RECORD_BODY = Buffer.from('once-nats: the stream generation whose messages keep bare sequence ids');
/** 1,000 years, in ms: the record must outlive every message it speaks for. */
const RECORD_RETENTION_MS = 1_000 * 365 * 86_400_000;

function recordOf(value: unknown, consumer: string): LegacyRecord {
  const r = value as Partial<LegacyRecord> | null | undefined;
  const text = (v: unknown) => v === null || typeof v === 'string';
  if (typeof r === 'object' && r !== null && text(r.stream) && text(r.created)) {
    return { stream: r.stream ?? null, created: r.created ?? null };
  }
  throw new OnceError(
    NatsErrorCode.SequenceIds,
    `inbox row '${LEGACY_RECORD_ID}' of consumer '${consumer}' is not once's record of the stream generation ` +
      'that keeps bare sequence ids (it holds no such result): was it written by something else?',
  );
}
