import { createInterface } from 'node:readline';
import { CliError } from './cli-error.js';
import { escapeLines } from './escape-text.js';
import { ExitCode } from './exit-codes.js';
import type { CliIo } from './io.js';

/**
 * Asks `question` on a terminal and resolves to whether the answer was yes. `yes` (the `--yes`
 * flag) skips the question. Without a terminal to ask on, and without `yes`, it refuses (exit 2)
 * rather than guess: a script must say `--yes`. Ctrl-C or end of input at the prompt is a no.
 */
export async function confirm(io: CliIo, question: string, yes: boolean): Promise<boolean> {
  if (yes) return true;
  const input = io.stdin;
  if (input?.isTTY !== true) {
    throw new CliError(
      ExitCode.Usage,
      'CONFIRMATION_REQUIRED',
      'this deletes records and there is no terminal to confirm on: pass --yes to go ahead',
    );
  }
  io.stderr.write(`${escapeLines(question)} [y/N] `);
  const rl = createInterface({ input, terminal: false });
  try {
    const answer = await new Promise<string>((resolve) => {
      rl.once('line', resolve);
      rl.once('close', () => resolve(''));
      io.signal?.addEventListener('abort', () => resolve(''), { once: true });
    });
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    rl.close();
    // A terminal's stdin left flowing would keep the process alive after the command.
    input.pause();
  }
}
