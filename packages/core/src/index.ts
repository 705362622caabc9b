/**
 * `@once/core`: effectively-once message processing on PostgreSQL. The inbox records a message's
 * id in the same transaction as the handler's writes; the outbox queues messages to publish in
 * the caller's transaction and the relay publishes them after COMMIT. Broker adapters
 * (`@once/kafka`, `@once/sqs`, `@once/rabbitmq`) build on it; their kit is `@once/core/adapter`,
 * operators' tools use `@once/core/admin`, handler tests `@once/core/testing`.
 *
 * ```ts
 * await migrate(pool);
 * const inbox = createInbox({ pool, consumer: 'billing.orders',
 *   handler: async (message, { tx }) => { await tx.query('INSERT INTO charges ...', [...]) } });
 * const outcome = await inbox.process({ id: 'order-1', body, headers: {}, source, attempt: 1, redelivered: false });
 * ```
 */
export type { BoundContext, BoundHandler, InboxBinding } from './binding.js';
export { ConnectTimeoutError, StatementTimeoutError } from './bounded-pool.js';
export type { CallerTransactions } from './caller-transactions.js';
export {
  type Envelope,
  type EnvelopeSource,
  type IdOf,
  MAX_ID_BYTES,
  MAX_ID_LENGTH,
  type Origin,
} from './envelope.js';
export {
  AttemptsExhaustedError,
  ErrorCode,
  InvalidIdError,
  OnceError,
  PermanentError,
  type SerializedError,
} from './errors.js';
export type { MessageEventBase, OnceEventListener, OnceEventMap, OnceEventName } from './events.js';
export type { Handler, HandlerContext, Tx } from './handler.js';
export { quoteIdentifier } from './identifier.js';
export { createInbox, Inbox } from './inbox.js';
export { idempotencyKey, MAX_STEP_NAME_LENGTH } from './lease/idempotency-key.js';
export { LeaseErrorCode } from './lease/lease-errors.js';
export {
  DEFAULT_LEASE_OPTIONS,
  type InboxMode,
  type LeaseOptions,
  type ResolvedLeaseOptions,
} from './lease/lease-options.js';
export type { Liveness } from './lease/liveness.js';
export type { StepFn, StepInfo } from './lease/steps.js';
export { type Logger, type LoggerOption, silentLogger } from './logger.js';
export { checkSchema, type MigrateOptions, type MigrateResult, migrate, schemaSql } from './migrate.js';
export { compatibleFrom, LATEST_SCHEMA_VERSION, MIGRATIONS, type Migration } from './migrations.js';
export {
  type BatchMode,
  type ConflictPolicy,
  DEFAULT_INBOX_OPTIONS,
  type Defined,
  type ErrorClass,
  type InboxOptions,
  type IsolationLevel,
  type ResolvedInboxOptions,
} from './options.js';
export {
  createOutbox,
  type DestinationOptions,
  Outbox,
  type OutboxOptions,
  type PublishOptions,
  type Queryable,
} from './outbox.js';
export type {
  OutboxMessage,
  OutboxPublisher,
  OutboxPublishOptions,
  OutboxPublishResult,
  OutboxRepublish,
} from './outbox-publisher.js';
export type {
  BusyOutcome,
  ConflictOutcome,
  DuplicateOutcome,
  FailedOutcome,
  FailReason,
  NotRunOutcome,
  Outcome,
  OutcomeBase,
  ProcessedOutcome,
  RetryOutcome,
} from './outcome.js';
export type { PgClientLike, PgPoolLike, QueryConfigLike, QueryResultLike } from './pg-like.js';
export type { ProcessOptions } from './process-options.js';
export { type PurgeOptions, purge } from './purge.js';
export { createRelay, Relay } from './relay.js';
export { RelayErrorCode, type RelayHealth, type RelayOptions } from './relay-options.js';
export { outboxChannel } from './sql/outbox.js';
