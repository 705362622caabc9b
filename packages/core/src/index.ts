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

export type { InboxMode, InboxOptions, LeaseSettings } from './engine/options.js';
export type { ProcessOptions } from './engine/process-options.js';
export { HOLD, type RouteFn, UnroutableError } from './engine/routing.js';
export { ErrorCode, OnceError, PermanentError, type SerializedError } from './errors.js';
export type { Handler, HandlerContext, StepFn, Tx } from './handler/handler.js';
export { createInbox, Inbox } from './inbox.js';
export type { Logger } from './logger.js';
export type { Envelope, EnvelopeSource, Liveness } from './message/envelope.js';
export type { MessageEventBase, OnceEventMap } from './message/events.js';
export { idempotencyKey } from './message/idempotency-key.js';
export type {
  BusyOutcome,
  ConflictOutcome,
  DuplicateOutcome,
  FailedOutcome,
  FailReason,
  NotRunOutcome,
  Outcome,
  ProcessedOutcome,
  RetryOutcome,
} from './message/outcome.js';
export {
  createOutbox,
  type DestinationOptions,
  Outbox,
  type OutboxOptions,
  type PublishOptions,
} from './outbox/outbox.js';
export type {
  OutboxMessage,
  OutboxPublisher,
  OutboxPublishOptions,
  OutboxPublishResult,
  OutboxRepublish,
} from './outbox/outbox-publisher.js';
export { createRelay, Relay } from './outbox/relay.js';
export {
  DEFAULT_RELAY_MAX_LISTENERS,
  type RelayDatabaseHealth,
  type RelayDatabasesOptions,
  type RelayHealth,
  type RelayOptions,
  type RelayPoolOptions,
  type RelaySettings,
} from './outbox/relay-options.js';
export type { CallerTransactions } from './pg/caller-transactions.js';
export type { PgClientLike, PgPoolLike, Queryable, QueryConfigLike, QueryResultLike } from './pg/pg-like.js';
export {
  DATABASE_NAME_PATTERN,
  type DatabaseFailure,
  type DatabaseMigrated,
  type DatabasePurged,
  DatabasesError,
  migrateDatabases,
  type NamedDatabases,
  type PurgeDatabasesOptions,
  purgeDatabases,
} from './schema/databases.js';
export { type MigrateOptions, type MigrateResult, migrate } from './schema/migrate.js';
