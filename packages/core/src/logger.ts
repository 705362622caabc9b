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

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
const NAMED: Readonly<Record<string, string>> = {
  '\b': '\\b',
  '\t': '\\t',
  '\n': '\\n',
  '\f': '\\f',
  '\r': '\\r',
};

/**
 * Text for one console line: every C0 control, DEL and C1 control written as JSON writes it
 * (`\n`, `\u001b`, `\u009b`). Ids and error messages come from producers: raw, a newline would
 * forge a log line and an ESC or C1 sequence would rewrite an operator's terminal.
 */
function escapeControls(text: string): string {
  return text.replace(
    CONTROL,
    (c) => NAMED[c] ?? `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`,
  );
}

function line(fields: Record<string, unknown>, message: string): string {
  const parts = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return escapeControls(parts.length > 0 ? `${message} ${parts.join(' ')}` : message);
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

/** The name of a function's first parameter, as its source spells it; undefined for native code. */
export function firstParameterOf(fn: unknown): string | undefined {
  if (typeof fn !== 'function') return undefined;
  const src = Function.prototype.toString.call(fn);
  const arrow = /^\s*(?:async\s+)?([A-Za-z_$][\w$]*)\s*=>/.exec(src);
  if (arrow) return arrow[1];
  const list = /^[^(]*\(\s*([A-Za-z_$][\w$]*)/.exec(src);
  return list?.[1];
}

const MESSAGE_FIRST = /^(msg|message|text|str|string|line|format|fmt|template)$/i;
const warnedLoggers = new WeakSet<object>();

/**
 * A logger written for the `(message, fields)` order of an earlier 0.x would print every fields
 * object as its message, silently. Its methods' first parameter names give it away (`msg`,
 * `message`, …): warn once per logger, in the order it expects, so the warning itself reads right.
 */
function warnIfMessageFirst(logger: Logger): void {
  if (warnedLoggers.has(logger)) return;
  warnedLoggers.add(logger);
  const levels = (['debug', 'info', 'warn', 'error'] as const).filter((level) =>
    MESSAGE_FIRST.test(firstParameterOf(logger[level]) ?? ''),
  );
  if (levels.length === 0) return;
  const text =
    `once: the logger's ${levels.join('/')} method takes the message first; once calls ` +
    'logger.warn(fields, message), the order of pino and bunyan: swap its parameters (docs/core.md, "Logging")';
  if (levels.includes('warn')) {
    (logger.warn as unknown as (message: string, fields: Record<string, unknown>) => void)(text, { levels });
  } else logger.warn({ levels }, text);
}

/** The two loggers an option resolves to: everything (silent by default) and the failure lines. */
export function resolveLoggers(option: LoggerOption | undefined): { logger: Logger; failureLogger: Logger } {
  if (option === false) return { logger: silentLogger, failureLogger: silentLogger };
  if (option === undefined) return { logger: silentLogger, failureLogger: consoleFailureLogger };
  warnIfMessageFirst(option);
  return { logger: option, failureLogger: option };
}
