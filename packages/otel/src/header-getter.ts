import type { TextMapGetter } from '@opentelemetry/api';

/** An envelope's headers: strings by name, as every adapter maps them. */
export type Headers = Readonly<Record<string, string | undefined>>;

/**
 * Reads trace context from envelope headers. Adapters keep header names as the producer wrote
 * them; W3C propagators ask in lower case (`traceparent`), so a name in another case (an HTTP
 * gateway's `Traceparent`) is found by a case-insensitive scan when the exact name is absent.
 */
export const headerGetter: TextMapGetter<Headers> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const exact = carrier[key];
    if (exact !== undefined) return exact;
    const lower = key.toLowerCase();
    for (const name of Object.keys(carrier)) {
      if (name.toLowerCase() === lower) return carrier[name];
    }
    return undefined;
  },
};
