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
export type { CallerTransactions } from './caller-transactions.js';
export type { Envelope, EnvelopeSource, Liveness } from './envelope.js';
export { ErrorCode, OnceError, PermanentError, type SerializedError } from './errors.js';
export type { MessageEventBase, OnceEventMap } from './events.js';
export type { Handler, HandlerContext, StepFn, Tx } from './handler.js';
export { idempotencyKey } from './idempotency-key.js';
export { createInbox, Inbox } from './inbox.js';
export type { Logger } from './logger.js';
export { type MigrateOptions, type MigrateResult, migrate } from './migrate.js';
export type { InboxMode, InboxOptions, LeaseSettings } from './options.js';
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
  ProcessedOutcome,
  RetryOutcome,
} from './outcome.js';
export type { PgClientLike, PgPoolLike, QueryConfigLike, QueryResultLike } from './pg-like.js';
export type { ProcessOptions } from './process-options.js';
export { createRelay, Relay } from './relay.js';
export type { RelayHealth, RelayOptions } from './relay-options.js';
