import { PermanentError } from '@once/core';

/**
 * Raised instead of running a message that SQS has delivered more than `maxAttempts` times
 * without it ever completing: the consumer most likely died while running it (process.exit, OOM,
 * SIGKILL), which no catch block sees. Only the first such message of a group in a receive gets
 * this verdict; the ones behind it were counted up by the same deaths without having run, so they
 * run normally.
 */
export class AttemptsExhaustedError extends PermanentError {
  readonly receiveCount: number;

  constructor(receiveCount: number, maxAttempts: number) {
    super(
      `received ${receiveCount} times (maxAttempts ${maxAttempts}) without completing: the consumer most likely ` +
        'died while running it (process exit, out of memory, SIGKILL); dead-lettered without running it again',
    );
    this.name = 'AttemptsExhaustedError';
    this.receiveCount = receiveCount;
  }
}
