/** Header names once reads and writes on AMQP messages. */
export const Header = {
  /** 1-based attempt counter, raised each time a message goes through a retry tier. */
  attempt: 'x-once-attempt',
} as const;

/**
 * AMQP header tables hold strings, numbers, booleans, Buffers, arrays and nested tables
 * (`x-death`). Envelopes carry strings: scalars as text, Buffers as UTF-8, the rest as JSON.
 */
export function stringHeaders(raw: Record<string, unknown> | undefined): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  if (!raw) return out;
  // for...in over own keys: Object.entries would build an array (and one per entry) per delivery.
  for (const k in raw) {
    if (!Object.hasOwn(raw, k)) continue;
    const v = raw[k];
    if (v === undefined || v === null) continue;
    if (typeof v === 'string') out[k] = v;
    else if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') out[k] = String(v);
    else if (Buffer.isBuffer(v)) out[k] = v.toString('utf8');
    else {
      try {
        out[k] = JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? String(x) : x));
      } catch {
        out[k] = String(v);
      }
    }
  }
  return out;
}

/** Reads a non-negative integer header (AMQP may carry it as a number or a string); `fallback` otherwise. */
export function intHeader(raw: Record<string, unknown> | undefined, name: string, fallback: number): number {
  const v = raw?.[name];
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,9}$/.test(v) ? Number(v) : Number.NaN;
  return Number.isInteger(n) && n >= 0 ? n : fallback;
}
