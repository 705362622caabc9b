import type { StepFn } from '../handler/handler.js';
import { checkStepKey, checkStepName, idempotencyKey } from '../message/idempotency-key.js';
import { fromJsonb, toJsonb } from '../sql/jsonb.js';
import { LeaseErrorCode, stepError } from './lease-errors.js';

/** Where steps are made durable; lease mode implements it on Postgres, fenced by the lease owner. */
export interface StepStore {
  /** Renews the lease before a step's function runs; throws LEASE_LOST if it was taken over. */
  renew(): Promise<void>;
  /**
   * Records a step's result as jsonb text from `toJsonb` (`null` for undefined); throws LEASE_LOST
   * if the lease was taken over.
   */
  record(step: string, seq: number, json: string | null): Promise<void>;
}

/** What {@link Steps} needs besides the store. */
export interface StepsSpec {
  store: StepStore;
  /** Results recorded by earlier attempts, decoded, by step name (`undefined` for a step that returned nothing). */
  recorded: ReadonlyMap<string, unknown>;
  /** The consumer and message id the steps belong to (their key and idempotency keys). */
  consumer: string;
  id: string;
  signal: AbortSignal;
}

/**
 * The `ctx.step` of one handler run. A step's function runs only if no earlier attempt recorded
 * the step, and its result is recorded before `step` returns, so before the next step can start.
 * Steps run one at a time; a name is used once per run. The value returned is always the JSON
 * form of the result (what a later attempt would read back), so every attempt sees the same;
 * strings jsonb cannot hold (NUL, lone surrogates) are stored tagged and come back exact.
 */
export class Steps {
  readonly #spec: StepsSpec;
  readonly #used = new Set<string>();
  #running: string | undefined;
  #closed: Error | undefined;

  constructor(spec: StepsSpec) {
    this.#spec = spec;
  }

  /** Refuses every later step (the handler settled, or its lease is gone). A running step may still record. */
  close(reason: Error): void {
    this.#closed ??= reason;
  }

  async step<T>(name: string, fn: StepFn<T>): Promise<T> {
    checkStepName(name);
    if (this.#closed) throw this.#closed;
    if (typeof fn !== 'function') {
      throw stepError(LeaseErrorCode.InvalidStepName, `ctx.step('${name}', fn): fn must be a function`);
    }
    if (this.#running !== undefined) {
      throw stepError(
        LeaseErrorCode.StepsConcurrent,
        `ctx.step('${name}') started while step '${this.#running}' is running: await each step before the next`,
      );
    }
    if (this.#used.has(name)) {
      throw stepError(
        LeaseErrorCode.StepNameReused,
        `ctx.step('${name}') ran twice in one handler run: give each step its own name (e.g. 'charge:' + lineId)`,
      );
    }
    this.#used.add(name);
    const seq = this.#used.size;
    const { recorded, store } = this.#spec;
    if (recorded.has(name)) return recorded.get(name) as T;
    const { consumer, id } = this.#spec;
    // Before the effect: a key too large for the steps table's index could never be recorded.
    checkStepKey(consumer, id, name);
    this.#running = name;
    try {
      await store.renew();
      const value = await fn({
        idempotencyKey: idempotencyKey(consumer, id, name),
        signal: this.#spec.signal,
      });
      const json = toJson(name, value);
      await store.record(name, seq, json);
      return (json === null ? undefined : fromJsonb(JSON.parse(json))) as T;
    } finally {
      this.#running = undefined;
    }
  }
}

/**
 * The jsonb text of a step result (`toJsonb`: lossless for strings jsonb cannot hold), `null` for
 * undefined; a typed error for what JSON cannot hold.
 */
export function toJson(step: string, value: unknown): string | null {
  if (value === undefined) return null;
  let json: string | null;
  try {
    json = toJsonb(value);
  } catch (err) {
    throw stepError(
      LeaseErrorCode.StepResultNotSerializable,
      `the result of step '${step}' is not JSON-serialisable (${String(err)}): return plain data (ids, amounts, strings)`,
      err,
    );
  }
  if (json === null) {
    throw stepError(
      LeaseErrorCode.StepResultNotSerializable,
      `the result of step '${step}' is a ${typeof value}, which JSON cannot hold: return plain data`,
    );
  }
  return json;
}
