import { createHash } from 'node:crypto';
import { LeaseErrorCode, stepError } from './lease-errors.js';

/** Longest step name, in characters. */
export const MAX_STEP_NAME_LENGTH = 200;

// The UUID namespace of once's idempotency keys (a random v4 UUID, fixed forever: changing it
// would change every key and let the far end run effects a second time).
const NAMESPACE = Buffer.from('4f1c7e0a9b3d4c2e8a5f6d7b8c9e0a1b', 'hex');

/** Validates a step name and returns it; names the problem otherwise. */
export function checkStepName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_STEP_NAME_LENGTH) {
    throw stepError(
      LeaseErrorCode.InvalidStepName,
      `a step name must be a non-empty string of at most ${MAX_STEP_NAME_LENGTH} characters, got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/**
 * A stable key for one step of one message of one consumer: a name-based UUID (version 5, RFC
 * 9562) of `consumer`, `id` and `step`. The same on every attempt, worker and restart; different
 * for every other step, message or consumer. 36 characters, the format payment APIs accept.
 */
export function idempotencyKey(consumer: string, id: string, step: string): string {
  // Length-prefixed, so no choice of characters in one part can imitate another triple.
  const name = `${consumer.length}:${consumer}${id.length}:${id}${checkStepName(step)}`;
  const b = createHash('sha1').update(NAMESPACE).update(name, 'utf8').digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
