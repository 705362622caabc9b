/** The instrumentation scope name of the meter and the tracer. */
export const SCOPE_NAME = '@once/otel';
