export { CliError } from './cli-error.js';
export { EXIT_CODES_HELP, ExitCode } from './exit-codes.js';
export type { CliIo, InputLike, OutputLike } from './io.js';
export { maskUrl } from './mask-url.js';
export { run } from './run.js';
