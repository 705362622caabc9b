import { createHash } from 'node:crypto';
import { ErrorCode, OnceError, PermanentError } from '../errors.js';
import { isWellFormed } from './envelope.js';

/** Longest step name, in characters. */
export const MAX_STEP_NAME_LENGTH = 200;

/**
 * Largest encoded size of a step's key, in UTF-8 bytes: consumer, message id and step name
 * together. They are the primary key of the steps table, and a PostgreSQL btree entry holds at
 * most 2,704 bytes (8 kB pages) with its header, three length words and alignment (at most 33
 * bytes more). Each part alone is within its limit in characters; with multi-byte characters the
 * three together can still pass the index's, and the step's record would then fail after its
 * effect ran, on every attempt.
 */
export const MAX_STEP_KEY_BYTES = 2_600;

// The UUID namespace of once's idempotency keys (a random v4 UUID, fixed forever: changing it
// would change every key and let the far end run effects a second time).
const NAMESPACE = Buffer.from('4f1c7e0a9b3d4c2e8a5f6d7b8c9e0a1b', 'hex');

/**
 * Validates a step name and returns it; names the problem otherwise. A name holding a lone
 * surrogate is refused as ids are: UTF-8 has no form for it, so 'x\ud800' and 'x\ud801' would share
 * one idempotency key and one row of the steps table.
 */
export function checkStepName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_STEP_NAME_LENGTH) {
    throw new OnceError(
      ErrorCode.InvalidStepName,
      `a step name must be a non-empty string of at most ${MAX_STEP_NAME_LENGTH} characters, got ${JSON.stringify(name)}`,
    );
  }
  if (!isWellFormed(name)) {
    throw new OnceError(
      ErrorCode.InvalidStepName,
      `a step name must be well-formed Unicode, got ${JSON.stringify(name)} (it holds a lone surrogate)`,
    );
  }
  return name;
}

/**
 * Refuses a step whose key (consumer, id, step name) is too large to record, before its effect
 * runs: a PermanentError naming the sizes and the limit, so the message is recorded failed.
 */
export function checkStepKey(consumer: string, id: string, step: string): void {
  const parts = [consumer, id, step].map((p) => Buffer.byteLength(p, 'utf8'));
  const total = parts[0]! + parts[1]! + parts[2]!;
  if (total <= MAX_STEP_KEY_BYTES) return;
  throw new PermanentError(
    `step '${clip(step)}' of ${clip(consumer)}/${clip(id)} cannot be recorded: its key is ${total} bytes in UTF-8 ` +
      `(consumer ${parts[0]}, message id ${parts[1]}, step name ${parts[2]}) and the steps table's index holds at ` +
      `most ${MAX_STEP_KEY_BYTES}; the step did not run. Use a shorter step name (e.g. a hash of its long part)`,
  );
}

/** The start of a long name, for messages (whole code points: no half of a surrogate pair). */
function clip(s: string): string {
  const points = Array.from(s);
  return points.length > 40 ? `${points.slice(0, 40).join('')}…` : s;
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
