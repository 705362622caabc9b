/**
 * `@once/core/admin`: a typed API over once's tables for operators' tools, scripts and metrics
 * (the `once` CLI and `@once/otel` are built on it). Each function takes a pool (or a pg client,
 * or the handler's `tx`, where no transaction of its own is needed) and the schema name, and
 * returns typed rows; what cannot be done as asked throws an {@link AdminError} with a `code`
 * and typed `detail`, and nothing is changed. 0.x: it may change between minors.
 *
 * ```ts
 * const { total, failed } = await listFailed(pool, 'once', { consumer: 'billing.orders' });
 * for (const f of failed) await retryFailed(pool, 'once', f); // the next delivery runs afresh
 * ```
 */

export { MAX_ID_BYTES, MAX_ID_LENGTH } from '../message/envelope.js';
export { nearest } from '../nearest.js';
export { classifyDbError, type DbErrorClass } from '../pg/sqlstate.js';
export { checkSchema } from '../schema/check-schema.js';
export { type PurgeDatabasesOptions, purgeDatabases } from '../schema/databases.js';
export { schemaSql } from '../schema/migrate.js';
export { compatibleFrom, LATEST_SCHEMA_VERSION, MIGRATIONS, type Migration } from '../schema/migrations.js';
export { type PurgeOptions, purge } from '../schema/purge.js';
export type { SchemaStatus } from '../schema/schema-compat.js';
export { quoteIdentifier } from '../sql/identifier.js';
export { outboxChannel } from '../sql/outbox.js';
export { AdminError, AdminErrorCode, type AdminErrorDetail } from './admin-error.js';
export type { MessageKey } from './admin-sql.js';
export { type CopyInboxOptions, type CopyInboxResult, copyInboxRows } from './copy-inbox.js';
export {
  discardFailed,
  type FailedBody,
  type FailedSummary,
  type ListFailedOptions,
  listFailed,
  type RetryFailedOptions,
  type RetryFailedResult,
  retryFailed,
} from './failed.js';
export {
  countForgetRange,
  type ForgetOptions,
  type ForgetRange,
  type ForgetRangeCount,
  type ForgetRangeOptions,
  type ForgetRangeResult,
  type ForgetResult,
  forgetMessage,
  forgetRange,
} from './forget.js';
export { type InboxGauges, type OutboxGauges, readInboxGauges, readOutboxGauges } from './gauges.js';
export { grantRuntime, runtimeGrants } from './grants.js';
export {
  consumerExists,
  findInboxRow,
  getInboxRow,
  type InboxRecord,
  readSteps,
  requireConsumer,
  type StepRecord,
} from './lookup.js';
export { type OutboxRetrySelector, retryOutbox, wakeRelays } from './outbox-admin.js';
export { RepublishDedup, type RepublishOptions } from './republish-plan.js';
export { readSchemaState, type SchemaState } from './schema-state.js';
export {
  type ConsumerStats,
  countExpired,
  type DestinationStats,
  inboxStats,
  outboxStats,
} from './stats.js';
