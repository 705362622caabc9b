import { OnceError } from '../errors.js';

/** Error codes of lease mode and durable steps. */
export const LeaseErrorCode = {
  /** Another worker took the message over (or the lease could not be renewed in time): stop. */
  LeaseLost: 'LEASE_LOST',
  /** A step name is empty, too long, or not a string. */
  InvalidStepName: 'INVALID_STEP_NAME',
  /** The same step name ran twice in one handler run. */
  StepNameReused: 'STEP_NAME_REUSED',
  /** A step started while another step of the same message was still running. */
  StepsConcurrent: 'STEPS_CONCURRENT',
  /** A step's result cannot be stored as JSON. */
  StepResultNotSerializable: 'STEP_RESULT_NOT_SERIALIZABLE',
  /** A step was called after the handler had settled. */
  StepAfterSettle: 'STEP_AFTER_SETTLE',
  /** `ctx.step` in a consumer that is not in lease mode. */
  StepNeedsLease: 'STEP_NEEDS_LEASE',
} as const;
export type LeaseErrorCode = (typeof LeaseErrorCode)[keyof typeof LeaseErrorCode];

/** Codes of mistakes in the handler's code: retrying cannot help, so the message is recorded failed. */
const PERMANENT: ReadonlySet<string> = new Set([
  LeaseErrorCode.InvalidStepName,
  LeaseErrorCode.StepNameReused,
  LeaseErrorCode.StepsConcurrent,
  LeaseErrorCode.StepResultNotSerializable,
  LeaseErrorCode.StepNeedsLease,
]);

/** True for a lease-mode error that retrying cannot fix. */
export function isPermanentLeaseError(err: unknown): boolean {
  return OnceError.is(err) && PERMANENT.has(err.code);
}

/** True when the error says this worker no longer holds the message. */
export function isLeaseLost(err: unknown): boolean {
  return OnceError.is(err) && err.code === LeaseErrorCode.LeaseLost;
}

export function leaseLost(consumer: string, id: string, how: string): OnceError {
  return new OnceError(
    LeaseErrorCode.LeaseLost,
    `lease on ${consumer}/${id} lost: ${how}; stop, the current owner finishes the message`,
    { retryable: true },
  );
}

export function stepError(code: LeaseErrorCode, message: string, cause?: unknown): OnceError {
  return new OnceError(code, message, cause === undefined ? {} : { cause });
}
