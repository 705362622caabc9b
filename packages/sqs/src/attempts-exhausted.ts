import { PermanentError } from '@once/core';

/**
 * Raised instead of running a redelivered message that has been started more than
 * `maxAttempts` times without completing: the consumer most likely died while running it
 * (process.exit, out of memory, SIGKILL), which no catch block sees. Starts are counted in
 * Postgres (Inbox.noteStart) just before a redelivered message runs, alone: messages that were
 * only received with it, and so had their receive counts raised by the same deaths, are not
 * counted, and run normally.
 */
export class AttemptsExhaustedError extends PermanentError {
  /** How many times it was started while redelivered, this start included. */
  readonly starts: number;

  constructor(starts: number, maxAttempts: number) {
    super(
      `started ${starts} times (maxAttempts ${maxAttempts}) without completing: the consumer most likely ` +
        'died while running it (process exit, out of memory, SIGKILL); dead-lettered without running it again',
    );
    this.name = 'AttemptsExhaustedError';
    this.starts = starts;
  }
}
