/**
 * The logger once writes to: fields first, then the message, the shape of pino and bunyan, so
 * `pino()` or a pino child can be passed as is. `console` fits too (it prints the fields object,
 * then the message).
 */
export interface Logger {
  /** Detail for debugging: every claim, commit and retry. */
  debug(fields: Record<string, unknown>, message: string): void;
  /** What an operator wants to see: consumers starting, stopping, reconnecting. */
  info(fields: Record<string, unknown>, message: string): void;
  /** Something went wrong with a message or a connection; once carries on. */
  warn(fields: Record<string, unknown>, message: string): void;
  /** Something went wrong that once cannot carry on from by itself. */
  error(fields: Record<string, unknown>, message: string): void;
}

/** The `logger` option: a logger, or `false` to silence everything (also the failure lines). */
export type LoggerOption = Logger | false;

const noop = (): void => {};

/** A logger that drops everything. */
export const silentLogger: Logger = Object.freeze({ debug: noop, info: noop, warn: noop, error: noop });

function line(fields: Record<string, unknown>, message: string): string {
  const parts = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return parts.length > 0 ? `${message} ${parts.join(' ')}` : message;
}

/**
 * What the failure lines (dead letter, conflict, invalid id, exhausted attempts) go to when no
 * logger is given: one `console.warn` line each. Everything else stays silent by default.
 */
export const consoleFailureLogger: Logger = Object.freeze({
  debug: noop,
  info: noop,
  warn: (fields: Record<string, unknown>, message: string) => console.warn(line(fields, message)),
  error: (fields: Record<string, unknown>, message: string) => console.error(line(fields, message)),
});

/** The two loggers an option resolves to: everything (silent by default) and the failure lines. */
export function resolveLoggers(option: LoggerOption | undefined): { logger: Logger; failureLogger: Logger } {
  if (option === false) return { logger: silentLogger, failureLogger: silentLogger };
  if (option === undefined) return { logger: silentLogger, failureLogger: consoleFailureLogger };
  return { logger: option, failureLogger: option };
}
