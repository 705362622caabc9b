/**
 * The item a message becomes. Owns one decision: what an envelope is to the engine (its id after
 * `idOf`, its fingerprint), and what it is when it cannot be made one: no usable id (a failure
 * with no id to record it under), or a throwing `fingerprintOf` (the message's permanent failure,
 * recorded under its id).
 */

import { PermanentError, serializeError } from '../errors.js';
import type { Handler } from '../handler/handler.js';
import { type Envelope, resolveId } from '../message/envelope.js';
import { type FingerprintHex, fingerprintHex } from '../message/fingerprint.js';
import type { ResolvedInboxOptions } from './options.js';
import type { ProcessOptions, StartBudget } from './process-options.js';

/** A message with its id resolved and its fingerprint taken. */
export interface Item {
  envelope: Envelope;
  id: string;
  /** SHA-256 fingerprint, lowercase hex (`hexBytes` gives its bytes for a parameterised statement). */
  fpHex: FingerprintHex;
  /** The call's own handler (`ProcessOptions.handler`), if it brought one. */
  handler: Handler<unknown> | undefined;
  /** A suspect's start count (`ProcessOptions.starts`): the engine's, never the envelope's. */
  starts: StartState | undefined;
}

/** A suspect item's start count for one call (engine/start-budget.ts). */
export interface StartState {
  readonly budget: StartBudget;
  /** Its start was counted in this call (and not taken back). */
  counted: boolean;
  /** With `attemptIsStarts`: the counted starts, the attempt the failure policy judges. */
  attempt: number | undefined;
  /** Refused past `maxAttempts`: the count that was. */
  refused: number | undefined;
}

function startState(budget: StartBudget): StartState {
  return { budget, counted: false, attempt: undefined, refused: undefined };
}

/** What an envelope became: an item, or the reason it could not become one. */
export type Prepared =
  | { kind: 'item'; item: Item }
  /** No usable id: failed, with nothing to record it under. */
  | { kind: 'invalid-id'; envelope: Envelope; error: unknown }
  /** The id is good, the rest threw: a permanent failure recorded under `item`. */
  | { kind: 'unplaceable'; item: Item; error: PermanentError };

type ItemOptions = Pick<ResolvedInboxOptions, 'idOf' | 'fingerprintOf'>;

/** The payload fingerprint: of `fingerprintOf`'s projection when given, else of the body. */
export function fingerprintOf(envelope: Envelope, o: Pick<ItemOptions, 'fingerprintOf'>): FingerprintHex {
  return fingerprintHex(o.fingerprintOf ? o.fingerprintOf(envelope) : envelope.body);
}

/**
 * Makes an envelope an item, with the call's options (`call`). Never throws: a user function's
 * failure is the message's.
 */
export function prepare<R>(envelope: Envelope, o: ItemOptions, call?: ProcessOptions<R>): Prepared {
  let id: string;
  try {
    id = resolveId(envelope, o.idOf);
  } catch (error) {
    return { kind: 'invalid-id', envelope, error };
  }
  const handler = call?.handler as Handler<unknown> | undefined;
  const starts = call?.starts?.suspect ? startState(call.starts) : undefined;
  try {
    return { kind: 'item', item: { envelope, id, fpHex: fingerprintOf(envelope, o), handler, starts } };
  } catch (err) {
    // The id is good, so the failure can be recorded under it: a throwing fingerprintOf is the
    // message's permanent failure, not a missing id.
    const error = new PermanentError(`fingerprintOf threw: ${serializeError(err).message}`, { cause: err });
    const fpHex = fingerprintHex(envelope.body);
    return { kind: 'unplaceable', item: { envelope, id, fpHex, handler, starts }, error };
  }
}
