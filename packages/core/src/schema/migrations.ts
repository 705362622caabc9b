/**
 * One numbered step of the schema. Every migration says what it does to code built against the
 * schema before it (expand/contract, docs/upgrades.md):
 * - `expand`: it only adds (a table, a nullable column or one with a default, an index, a wider
 *   check), so code of every earlier version keeps reading and writing as before;
 * - `contract`: it removes or changes something earlier code reads or writes (drops or renames a
 *   column, narrows a check, adds NOT NULL without a default). `removes` says what, in words, for
 *   the refusal older code prints; `compatibleFrom` is the oldest code version that no longer
 *   needs it (default: this migration's own version, i.e. no earlier code runs on it).
 */
export type Migration = {
  /** The schema version this migration brings the database to; versions count up from 1 without gaps. */
  readonly version: number;
  /** A short name for what it does (`inbox`), recorded in the `schema_version` table with the version. */
  readonly name: string;
  /** The statements it runs; `{schema}` stands for the quoted schema name, filled in when it is applied. */
  readonly sql: string;
} & (
  | {
      /** `expand`: it only adds, so code built against every earlier version keeps working. */
      readonly change: 'expand';
    }
  | {
      /** `contract`: it removes or changes something code built against an earlier version uses. */
      readonly change: 'contract';
      /** What it removes or changes, in words, for the refusal that older code prints. */
      readonly removes: string;
      /** The oldest code version that no longer needs what it removes. @default this migration's version */
      readonly compatibleFrom?: number;
    }
);

/**
 * The schema, as numbered migrations. `{schema}` is replaced by the validated, quoted schema
 * name. A migration is never edited once released: add a new one.
 */
export const MIGRATIONS: readonly Migration[] = Object.freeze([
  {
    version: 1,
    name: 'inbox',
    change: 'expand',
    sql: `
CREATE TABLE {schema}.inbox (
  consumer        text        NOT NULL,
  message_id      text        NOT NULL,
  -- SHA-256 of the body (or of the user's projection of it)
  fingerprint     bytea       NOT NULL,
  -- 'done': processed, effects committed with this row; 'failed': recorded poison message
  status          text        NOT NULL CHECK (status IN ('done', 'failed')),
  result          jsonb,
  error           jsonb,
  -- the body of a failed message, for operators to inspect and replay
  body            bytea,
  body_truncated  boolean     NOT NULL DEFAULT false,
  attempts        integer     NOT NULL DEFAULT 1,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (consumer, message_id)
);
-- purge walks expired rows in small batches through this index
CREATE INDEX inbox_expires_at_idx ON {schema}.inbox (expires_at);
-- operators list failed rows per consumer
CREATE INDEX inbox_failed_idx ON {schema}.inbox (consumer, created_at) WHERE status = 'failed';
`,
  },
  {
    version: 2,
    name: 'outbox',
    change: 'expand',
    sql: `
CREATE TABLE {schema}.outbox (
  -- publish order; per key, only the oldest pending row may be in flight
  seq           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- the message id downstream consumers deduplicate on: a UUID, so outboxes of several
  -- services never collide in one downstream inbox
  id            uuid        NOT NULL DEFAULT gen_random_uuid() UNIQUE,
  destination   text        NOT NULL,
  key           text,
  body          bytea       NOT NULL,
  headers       jsonb       NOT NULL DEFAULT '{}'::jsonb,
  -- 'pending' → 'sent' once the broker confirmed it; 'failed' when parked after maxAttempts
  status        text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
  attempts      integer     NOT NULL DEFAULT 0,
  available_at  timestamptz NOT NULL DEFAULT now(),
  last_error    jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  sent_at       timestamptz
);
-- the relay's scan: pending rows in order, and "is there an older pending row of this key?"
CREATE INDEX outbox_pending_idx ON {schema}.outbox (seq) WHERE status = 'pending';
CREATE INDEX outbox_pending_key_idx ON {schema}.outbox (key, seq) WHERE status = 'pending';
-- cleanup of sent rows by age
CREATE INDEX outbox_sent_idx ON {schema}.outbox (sent_at) WHERE status = 'sent';
`,
  },
  {
    version: 3,
    name: 'lease',
    change: 'expand',
    sql: `
-- lease mode: 'in_progress' rows are held by owner until lease_until (database clock);
-- owner NULL means released (claimable at once). Both are NULL on 'done' and 'failed' rows.
-- The new columns are nullable without defaults, so existing rows are not rewritten.
ALTER TABLE {schema}.inbox
  ADD COLUMN owner text,
  ADD COLUMN lease_until timestamptz,
  -- the name PostgreSQL gave version 1's column constraint
  DROP CONSTRAINT inbox_status_check,
  ADD CONSTRAINT inbox_status_check CHECK (status IN ('done', 'failed', 'in_progress'));
-- operators look for stuck leases per consumer
CREATE INDEX inbox_in_progress_idx ON {schema}.inbox (consumer, lease_until) WHERE status = 'in_progress';
-- durable steps: one row per (consumer, message, step), written before the next step runs
CREATE TABLE {schema}.steps (
  consumer     text        NOT NULL,
  message_id   text        NOT NULL,
  step         text        NOT NULL,
  -- position of the step in the handler run that recorded it (1-based)
  seq          integer     NOT NULL,
  -- the inbox attempt that recorded it
  attempt      integer     NOT NULL,
  -- the step's JSON result; NULL when the step returned undefined
  result       jsonb,
  recorded_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, message_id, step),
  -- purge removes a message's steps with its inbox row
  FOREIGN KEY (consumer, message_id) REFERENCES {schema}.inbox (consumer, message_id) ON DELETE CASCADE
);
`,
  },
  {
    version: 4,
    name: 'fences',
    change: 'expand',
    sql: `
-- offset fencing: per consumer and partition of an ordered stream, the next offset to process;
-- a message below it is a duplicate. Written in the transaction of the message's effects.
CREATE TABLE {schema}.fences (
  consumer     text    NOT NULL,
  stream       text    NOT NULL,
  partition    integer NOT NULL,
  next_offset  bigint  NOT NULL,
  PRIMARY KEY (consumer, stream, partition)
);
`,
  },
  {
    version: 5,
    name: 'republish',
    change: 'expand',
    sql: `
-- where a failed message came from ({broker, queue, partition, key, headers}), so an operator can
-- send its stored body back there; NULL on 'done' rows and on rows recorded before version 5
ALTER TABLE {schema}.inbox ADD COLUMN origin jsonb;
-- the message id to publish under when it is not the row's UUID (a republished failed message
-- keeps its own id, so the consumer's inbox still recognises the original delivery)
ALTER TABLE {schema}.outbox ADD COLUMN message_id text;
`,
  },
  {
    version: 6,
    name: 'starts',
    change: 'expand',
    sql: `
-- how many times a redelivered message was started, counted before it runs and outside its
-- transaction, so a message that kills the process is counted and its neighbours are not
-- (Inbox.noteStart); rows expire with the consumer's retention and purge() removes them
CREATE TABLE {schema}.starts (
  consumer    text        NOT NULL,
  message_id  text        NOT NULL,
  starts      integer     NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (consumer, message_id)
);
CREATE INDEX starts_expires_at_idx ON {schema}.starts (expires_at);
`,
  },
  {
    version: 7,
    name: 'fence-check',
    change: 'expand',
    sql: `
-- the id and fingerprint of the message the fence last moved past (at next_offset - 1), so a
-- consumer can check that the log still holds that message before it takes offsets below the
-- fence for duplicates: a deleted and recreated topic numbers its offsets from 0 again.
-- NULL on rows written before version 7 until the fence next moves.
ALTER TABLE {schema}.fences
  ADD COLUMN last_id text,
  ADD COLUMN last_fingerprint bytea;
`,
  },
  {
    version: 8,
    name: 'http-responses',
    change: 'expand',
    sql: `
-- @once/http: the response stored with an HTTP idempotency key (an inbox row of an HTTP
-- consumer), replayed to the key's retries: the status, the headers as [name, value] pairs and
-- the body's bytes. On the inbox row itself, so the key's retention and purge() remove the
-- response with it and a replay reads one row. Nullable without defaults: no rewrite of the
-- table, and NULL on every message row.
ALTER TABLE {schema}.inbox
  ADD COLUMN response_status smallint,
  ADD COLUMN response_headers jsonb,
  ADD COLUMN response_body bytea;
`,
  },
  {
    version: 9,
    name: 'steps-no-cascade',
    change: 'contract',
    removes:
      "the cascade from inbox to steps: purge and the admin deletes of older versions rely on it to remove a message's durable steps",
    compatibleFrom: 9,
    sql: `
-- Every statement that deletes inbox rows now deletes the rows' durable steps itself, in the same
-- statement, and a fresh lease claim deletes steps left under its id. The foreign key's ON DELETE
-- CASCADE ran a query per deleted inbox row, steps or none: most of a purge step's time. Code of
-- version 8 or earlier relies on it, so this contracts: on this schema its purge would leave the
-- steps of purged messages, which its lease mode would replay for a later delivery of the same id.
-- has_steps: whether the row may have steps, so purge looks up the steps of those rows only. Set
-- by lease mode's first step record of the row (in the statement that inserts the step). Rows
-- older than this migration read true (the default they were added with, kept in the catalog: no
-- rewrite); rows inserted from now on start false.
ALTER TABLE {schema}.inbox ADD COLUMN has_steps boolean NOT NULL DEFAULT true;
ALTER TABLE {schema}.inbox ALTER COLUMN has_steps SET DEFAULT false;
-- The name PostgreSQL gave version 3's constraint.
ALTER TABLE {schema}.steps DROP CONSTRAINT steps_consumer_message_id_fkey;
`,
  },
  {
    version: 10,
    name: 'republish-mark',
    change: 'expand',
    sql: `
-- Set on a row that republishes a message already sent under its id (the admin API's and the
-- CLI's failed retry with republish): a broker that deduplicates on the id inside a window
-- (JetStream's Nats-Msg-Id, SQS FIFO's MessageDeduplicationId) would drop it there, so its
-- "duplicate" answer is no delivery. The value is the broker-level deduplication id to send it
-- with where the broker keeps one apart from the message id (SQS FIFO): a fresh one, or the
-- message id itself when its consumer takes ids from the deduplication id. NULL on every other
-- row; nullable without a default, so the table is not rewritten, and code of version 9 or
-- earlier ignores it (its relays publish a marked row as any other).
ALTER TABLE {schema}.outbox ADD COLUMN republish_dedup_id text;
`,
  },
  {
    version: 11,
    name: 'inflight',
    change: 'expand',
    sql: `
-- The replay marker of an ordered consumer whose broker client cannot keep it in the committed
-- offset's metadata (@once/kafka on a client without commit metadata): per consumer and
-- partition, the last offset (inclusive) of the slice it was about to run, written on its own
-- (Inbox.noteInflight) before the slice runs. After a crash the next owner runs the offsets from
-- the committed one up to end_offset alone, each start counted (starts). A row whose end_offset
-- is below the committed offset means nothing, so rows are never deleted by the consumer: one per
-- (consumer, stream, partition), overwritten in place; purge() leaves them. New table: code of
-- version 10 or earlier never reads it.
CREATE TABLE {schema}.inflight (
  consumer    text        NOT NULL,
  stream      text        NOT NULL,
  partition   integer     NOT NULL,
  end_offset  bigint      NOT NULL,
  noted_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, stream, partition)
);
`,
  },
]);

/** The schema version this build of @once/core expects. */
export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;

/**
 * The oldest code version that runs on the schema at `version` of `migrations`: the highest
 * `compatibleFrom` of a contract migration up to `version`, or 1 when every one of them expands.
 * It never falls: a later contract cannot give back what an earlier one removed.
 */
export function compatibleFrom(migrations: readonly Migration[], version: number): number {
  let from = 1;
  for (const m of migrations) {
    if (m.version > version) break;
    if (m.change === 'contract') from = Math.max(from, m.compatibleFrom ?? m.version);
  }
  return from;
}
