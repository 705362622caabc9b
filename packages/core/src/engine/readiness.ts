/**
 * Whether the inbox can process messages. Owns one decision: when the schema is checked (once,
 * and again after a setup fault), and what the inbox reports as `available`. A setup fault
 * (schema missing or too new, database unreachable) is logged once until the schema checks out.
 */

import { serializeError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Outcome } from '../message/outcome.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import { checkSchema } from '../schema/check-schema.js';

export class Readiness {
  readonly #pool: PgPoolLike;
  readonly #schema: string;
  readonly #logger: Logger;
  readonly #consumer: string;
  #ready: Promise<void> | undefined;
  /** The last outcome said the database or the schema could not be used. */
  #unavailable = false;
  /** A setup fault was logged; reset when the schema checks out again. */
  #faultLogged = false;

  constructor(o: { pool: PgPoolLike; schema: string; logger: Logger; consumer: string }) {
    this.#pool = o.pool;
    this.#schema = o.schema;
    this.#logger = o.logger;
    this.#consumer = o.consumer;
  }

  get available(): boolean {
    return !this.#unavailable;
  }

  /** Checks once that the schema is installed at the expected version (again after a fault). */
  ready(): Promise<void> {
    if (!this.#ready) {
      this.#ready = checkSchema(this.#pool, this.#schema).then(
        () => {
          this.#faultLogged = false;
        },
        (err: unknown) => {
          this.#ready = undefined;
          throw err;
        },
      );
    }
    return this.#ready;
  }

  /** Forget that the schema was checked, so the next message checks again; say so once. */
  readonly fault = (err: unknown): void => {
    this.#ready = undefined;
    if (this.#faultLogged) return;
    this.#faultLogged = true;
    this.#logger.error(
      {
        consumer: this.#consumer,
        error: serializeError(err).message,
      },
      'once: the inbox cannot process messages; they are not run and will be redelivered',
    );
  };

  /** Follows outcomes: `unavailable` until a message reaches the database again. */
  note(o: Outcome): void {
    if (o.status === 'not-run') {
      if (o.why === 'unavailable') this.#unavailable = true;
    } else if (o.status !== 'retry' || o.spent) {
      this.#unavailable = false;
    }
  }
}
