/**
 * `@once/core/adapter`: the adapter kit. What broker adapters need from core and users do not:
 * the consumer contract (`Consumer`, its state, health and base events), `ConsumerBase` (the
 * skeleton every consumer shares, with its lifecycle: the stop deadline and the hold while the
 * database is unusable), option splitting and validators, the killer budget's call options (`StartBudgets`), the
 * concurrency primitives (limiter, keyed serializer, the process-wide isolation gate,
 * `takeGroup`, `processGroup`), the `DeliveryPipeline` (queue → groups → the inbox behind the gate → core's
 * settle plan → the adapter's broker calls, with reruns of what a stopped batch never ran),
 * `jsonHandler`, settle plans, the dead-letter record with its event and log line, an abortable
 * `sleep`, the publishers' pieces (`Connector`, the connect-once and reconnect-after-drop
 * state; `untilAborted`; `checkMessageId` and `settledResults`), the check of an id the client
 * decoded as text (`decodedIdCheck`), the helpers adapters share with core (`fingerprint`,
 * `serializeError`, `TypedEmitter`, `silentLogger`, `warnIfRetentionShort`), the option checks
 * (one message shape: `createKafkaConsumer: option 'batchSize' must be …`), `createHttpInbox`
 * (the inbox of `@once/http`'s keys, which stores each key's response) and `UnclaimedTx` (a
 * handler in once's transaction that claims nothing: `@once/http`'s requests without a key). It
 * names no broker. Test helpers are not exported: tests import them from the source. Nor are the
 * shapes of the kit's parameters (the specs of `ConsumerBase`, `DeliveryPipeline`, `processGroup`,
 * `splitOptions`, `logDropped`, `warnIfRetentionShort`): adapters write them as object literals.
 * See docs/adapters.md. Stability: 0.x, like every package here; a minor version may change it,
 * and each change is listed in CHANGELOG.md.
 *
 * ```ts
 * const { inbox, adapter } = splitOptions(options, { factory: 'createNatsConsumer', adapterKeys: ['subject'] });
 * const plan = settlePlanOf(await inbox.process(envelope), inbox.options); // what to tell the broker
 * ```
 */

export type { StoredHttpResponse } from '../engine/http-response-store.js';
export { databaseOptions, type ResolvedInboxOptions } from '../engine/options.js';
export { runsAlone } from '../engine/plan-runs.js';
export type { ResolvedRouting } from '../engine/routing.js';
export { UnclaimedTx } from '../engine/unclaimed-tx.js';
export { serializeError } from '../errors.js';
export { silentLogger } from '../logger.js';
export { TypedEmitter } from '../message/events.js';
export { fingerprint } from '../message/fingerprint.js';
export { optionCheck } from '../option-check.js';
export { checkDatabases } from '../schema/databases.js';
export { sleep } from '../sleep.js';
export { Connector } from './connector.js';
export type { Consumer, ConsumerEventMap, ConsumerHealth, ConsumerState } from './consumer.js';
export { ConsumerBase, type StartBudgets } from './consumer-base.js';
export {
  DEAD_LETTER_RECORD,
  type DeadLetterRecord,
  decodeDeadLetterRecord,
  encodeDeadLetterRecord,
} from './dead-letter-record.js';
export { deadLetteredEvent, logDropped } from './dead-lettered.js';
export { decodedIdCheck } from './decoded-id.js';
export { DeliveryPipeline, processGroup, takeGroup } from './delivery-pipeline.js';
export { createHttpInbox } from './http-inbox.js';
export { Gate, processGate } from './isolation-gate.js';
export { jsonHandler } from './json-handler.js';
export { KeyedSerializer } from './keyed-serializer.js';
export { Limiter } from './limiter.js';
export { checkMessageId, settledResults } from './publish-results.js';
export { warnIfRetentionShort } from './retention.js';
export { type DeadLetterPlan, type RetryPlan, type SettlePlan, settlePlanOf } from './settle-plan.js';
export { type AdapterOptionKey, type ResolvedOptions, splitOptions, withDefaults } from './split-options.js';
export { untilAborted } from './until-aborted.js';
