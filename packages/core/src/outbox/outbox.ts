/**
 * The transactional outbox: a message enqueued in the caller's transaction, and the after-commit
 * wake-up (NOTIFY) that sends relays to publish it.
 */

import { ErrorCode, OnceError } from '../errors.js';
import { MAX_ID_LENGTH } from '../message/envelope.js';
import { checkNumber, namingFactory } from '../option-check.js';
import type { PgPoolLike, Queryable } from '../pg/pg-like.js';
import { quoteIdentifier } from '../sql/identifier.js';
import { toJsonb } from '../sql/jsonb.js';
import { outboxChannel, outboxSql } from '../sql/outbox.js';

/** A destination the outbox may publish to. */
export interface DestinationOptions {
  /** Largest body accepted at enqueue, in bytes (SQS: 262144). @default 1048576 */
  maxBodyBytes?: number | undefined;
}

/** Options of {@link createOutbox}. */
export interface OutboxOptions {
  /** Used to send the after-commit wake-up (NOTIFY) to relays. */
  pool: PgPoolLike;
  /** @default 'once' */
  schema?: string | undefined;
  /** Every destination (topic, queue URL, exchange) messages may go to; anything else is refused at enqueue. */
  destinations: readonly string[] | Readonly<Record<string, DestinationOptions>>;
  /** Wake-ups within this window are sent as one NOTIFY, in ms. @default 10 */
  notifyDebounceMs?: number | undefined;
}

/** What `publish`/`enqueue` take besides destination and body. */
export interface PublishOptions {
  /** Ordering key: rows of one key are published in order, one at a time. */
  key?: string | undefined;
  /** String headers (Kafka headers, SQS attributes, AMQP headers). */
  headers?: Readonly<Record<string, string>> | undefined;
  /** Publish no earlier than this many ms after commit. @default 0 */
  delayMs?: number | undefined;
  /**
   * The message id to publish under, when the message already has one that downstream inboxes
   * must recognise (republishing a failed message; forwarding under a business key). At most
   * {@link MAX_ID_LENGTH} characters. @default the row's own UUID
   */
  messageId?: string | undefined;
}

const DEFAULT_MAX_BODY = 1_048_576;

/** What {@link enqueueRow} wrote: the message id it is published under, and the row's UUID. */
export interface EnqueuedRow {
  id: string;
  rowId: string;
}

let insertRow: (
  outbox: Outbox,
  tx: Queryable,
  destination: string,
  body: Buffer | string | object,
  options: PublishOptions,
  republishDedupId: string | undefined,
) => Promise<EnqueuedRow>;

/**
 * `outbox.enqueue`, with the same checks and statement, returning the row's UUID too. With
 * `republishDedupId` the row is marked a republish of a message already sent under its id
 * (migration 10), to be sent with that broker-level deduplication id where the broker keeps one.
 * Internal to core (the admin API's republish); not exported from the package root.
 */
export function enqueueRow(
  outbox: Outbox,
  tx: Queryable,
  destination: string,
  body: Buffer | string | object,
  options: PublishOptions = {},
  republishDedupId?: string,
): Promise<EnqueuedRow> {
  return insertRow(outbox, tx, destination, body, options, republishDedupId);
}

/**
 * The transactional outbox: `enqueue` writes a message into the caller's transaction, so it is
 * published if and only if that transaction commits. Relays (see `createRelay`) send it later
 * with the row's UUID as the message id, or the `messageId` it was given.
 */
export class Outbox {
  /** Once's schema, whose outbox table the rows go into. */
  readonly schema: string;
  readonly #pool: PgPoolLike;
  readonly #options: OutboxOptions;
  readonly #sql: ReturnType<typeof outboxSql>;
  readonly #limits: ReadonlyMap<string, number>;
  readonly #channel: string;
  readonly #debounceMs: number;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: OutboxOptions) {
    if (!options || typeof options.pool?.query !== 'function') {
      throw new OnceError(ErrorCode.InvalidOption, "option 'pool' must be a pg Pool");
    }
    this.schema = options.schema ?? 'once';
    this.#sql = outboxSql(quoteIdentifier(this.schema, "option 'schema'"));
    this.#pool = options.pool;
    this.#options = options;
    this.#channel = outboxChannel(this.schema);
    this.#debounceMs = checkNumber('notifyDebounceMs', options.notifyDebounceMs ?? 10, 0);
    const d = options.destinations;
    const entries: [string, number][] = Array.isArray(d)
      ? d.map((name) => [name, DEFAULT_MAX_BODY])
      : Object.entries(d ?? {}).map(([name, o]) => [
          name,
          checkNumber(
            `destinations.${name}.maxBodyBytes`,
            (o as DestinationOptions)?.maxBodyBytes ?? DEFAULT_MAX_BODY,
            1,
          ),
        ]);
    if (entries.length === 0) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        "option 'destinations' must name at least one destination",
      );
    }
    for (const [name] of entries) {
      if (typeof name !== 'string' || name.length === 0) {
        throw new OnceError(
          ErrorCode.InvalidOption,
          "option 'destinations': a destination name must be a non-empty string",
        );
      }
    }
    this.#limits = new Map(entries);
  }

  /**
   * The same outbox (schema, destinations, limits) whose wake-ups go to `pool`'s database: an
   * inbox over several databases (`databases`) gives each database's handlers one of these, so a
   * relay listening on that database hears of rows written there.
   */
  forPool(pool: PgPoolLike): Outbox {
    return new Outbox({ ...this.#options, pool });
  }

  /** The destinations this outbox accepts. */
  get destinations(): string[] {
    return [...this.#limits.keys()];
  }

  /**
   * Writes a message into the transaction `tx` belongs to. Throws OUTBOX_INVALID (naming the
   * field) for an unknown destination, an oversize body, or non-string headers. Returns the id.
   * Call {@link Outbox.wake} after your own COMMIT (handlers' publishes are woken for you).
   */
  async enqueue(
    tx: Queryable,
    destination: string,
    body: Buffer | string | object,
    options: PublishOptions = {},
  ): Promise<string> {
    return (await this.#insert(tx, destination, body, options)).id;
  }

  static {
    // The admin API's republish goes through the same checks and statement as enqueue, and
    // needs the row's UUID as well; this keeps that out of the public surface.
    insertRow = (outbox, ...args) => outbox.#insert(...args);
  }

  async #insert(
    tx: Queryable,
    destination: string,
    body: Buffer | string | object,
    options: PublishOptions,
    republishDedupId?: string,
  ): Promise<EnqueuedRow> {
    const limit = this.#limits.get(destination);
    if (limit === undefined) {
      throw invalid(
        `unknown destination ${JSON.stringify(destination)}: known are ${this.destinations.join(', ')}`,
      );
    }
    const bytes = Buffer.isBuffer(body)
      ? body
      : typeof body === 'string'
        ? Buffer.from(body)
        : Buffer.from(JSON.stringify(body));
    if (bytes.length > limit) {
      throw invalid(`body of ${bytes.length} bytes exceeds ${limit} bytes allowed for ${destination}`);
    }
    const { key, headers = {}, delayMs = 0, messageId } = options;
    if (
      messageId !== undefined &&
      (typeof messageId !== 'string' || messageId.length === 0 || messageId.length > MAX_ID_LENGTH)
    ) {
      throw invalid(`messageId must be a string of 1 to ${MAX_ID_LENGTH} characters when given`);
    }
    if (key !== undefined && (typeof key !== 'string' || key.length === 0)) {
      throw invalid('key must be a non-empty string when given');
    }
    for (const [name, value] of Object.entries(headers)) {
      if (typeof value !== 'string')
        throw invalid(`header ${JSON.stringify(name)} must be a string, got ${typeof value}`);
    }
    if (!Number.isInteger(delayMs) || delayMs < 0)
      throw invalid(`delayMs must be a non-negative integer, got ${delayMs}`);
    const values: unknown[] = [
      destination,
      key ?? null,
      bytes,
      // A header may hold a NUL, which jsonb refuses: stored tagged, decoded by the relay.
      toJsonb(headers),
      delayMs,
      messageId ?? null,
    ];
    const res = await tx.query<{ id: string; row_id: string }>(
      republishDedupId === undefined ? this.#sql.enqueue : this.#sql.enqueueRepublish,
      republishDedupId === undefined ? values : [...values, republishDedupId],
    );
    const row = res.rows[0]!;
    return { id: row.id, rowId: row.row_id };
  }

  /**
   * Tells relays there is work, after commit and outside any transaction (a NOTIFY inside one
   * takes a cluster-wide lock until commit). Debounced; failures are ignored, since relays poll.
   */
  wake(): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#pool.query(this.#sql.notify, [this.#channel]).catch(() => {});
    }, this.#debounceMs);
    this.#timer.unref?.();
  }
}

function invalid(message: string): OnceError {
  return new OnceError(ErrorCode.OutboxInvalid, `outbox: ${message}`);
}

/** Creates an {@link Outbox}. */
export function createOutbox(options: OutboxOptions): Outbox {
  return namingFactory('createOutbox', () => new Outbox(options));
}
