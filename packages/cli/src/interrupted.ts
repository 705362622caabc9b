import { ExitCode } from './exit-codes.js';

/**
 * The exit code of a command its signal stopped: 143 when bin.ts aborted it for SIGTERM, else
 * 130 (Ctrl-C), as shells report a process a signal ended; undefined when not stopped.
 */
export function interruptedExit(signal: AbortSignal | undefined): ExitCode | undefined {
  if (signal?.aborted !== true) return undefined;
  return signal.reason === 'SIGTERM' ? ExitCode.Terminated : ExitCode.Interrupted;
}
