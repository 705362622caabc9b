import { createRequire } from 'node:module';

/** The instrumentation scope name of the meter and the tracer. */
export const SCOPE_NAME = '@once/otel';

/** The instrumentation scope version: this package's version, read from its package.json. */
export const SCOPE_VERSION: string = (
  createRequire(import.meta.url)('../package.json') as { version: string }
).version;
