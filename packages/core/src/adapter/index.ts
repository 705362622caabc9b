/**
 * `@once/core/adapter`: what broker adapters need from core and users do not. Adapters import
 * from here; the subpath grows into the adapter kit (see docs). 0.x: it may change between minors.
 */

export { type FenceRecord, readFence } from '../fence.js';
export { fromJsonb, isJsonbSafeString, toJsonb } from '../sql/jsonb.js';
export {
  DEAD_LETTER_RECORD,
  type DeadLetterOutcome,
  type DeadLetterRecord,
  deadLetterRecordOf,
  decodeDeadLetterRecord,
  encodeDeadLetterRecord,
} from './dead-letter-record.js';
export { Gate, processGate } from './isolation-gate.js';
export { type SettlePlan, settlePlanOf } from './settle-plan.js';
