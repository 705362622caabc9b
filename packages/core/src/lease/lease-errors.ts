import { ErrorCode, OnceError } from '../errors.js';

/** The lease-mode codes of {@link ErrorCode}, by their names there. */
export const LeaseErrorCode = {
  LeaseLost: ErrorCode.LeaseLost,
  InvalidStepName: ErrorCode.InvalidStepName,
  StepNameReused: ErrorCode.StepNameReused,
  StepsConcurrent: ErrorCode.StepsConcurrent,
  StepResultNotSerializable: ErrorCode.StepResultNotSerializable,
  StepAfterSettle: ErrorCode.StepAfterSettle,
  StepNeedsLease: ErrorCode.StepNeedsLease,
} as const;

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

export function stepError(
  code: (typeof LeaseErrorCode)[keyof typeof LeaseErrorCode],
  message: string,
  cause?: unknown,
): OnceError {
  return new OnceError(code, message, cause === undefined ? {} : { cause });
}
