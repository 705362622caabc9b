/**
 * `@once/cli`: the `once` command (migrate, status, inspect, failed, forget, purge,
 * outbox). Its library surface runs the same program in-process, for tests and wrappers: `run`
 * takes the arguments and the streams and resolves to the exit code; it never calls
 * `process.exit`.
 *
 * ```ts
 * const code = await run(['status', '--json'], { stdout: process.stdout, stderr: process.stderr, env: process.env });
 * if (code === ExitCode.Schema) console.error('run `once migrate` first');
 * ```
 */
export { CliError } from './cli-error.js';
export { ExitCode } from './exit-codes.js';
export type { CliIo, InputLike, OutputLike } from './io.js';
export { run } from './run.js';
