/**
 * What a consumer was doing on a partition, kept in the metadata of the group's committed offset
 * (durable in Kafka, written in the same request that commits progress). After a restart it says
 * which offsets were in flight when the last consumer died, and how often a message run on its
 * own has been started: that count is the only attempt counter Kafka can offer for a message
 * that kills the process before any catch block runs.
 */
export interface ReplayMarker {
  /** Last offset (inclusive) of the range in flight; the range starts at the committed offset. */
  end: string;
  /** Offset of the message being run alone, when in replay. */
  at?: string;
  /** How many times the message at `at` has been started alone. */
  starts?: number;
}

const PREFIX = 'once:1:';
const OFFSET = /^\d{1,19}$/;

/** Encodes a marker as offset-commit metadata. */
export function encodeMarker(marker: ReplayMarker): string {
  return PREFIX + JSON.stringify(marker);
}

/** Decodes offset-commit metadata; anything not written by once (or malformed) is `undefined`. */
export function decodeMarker(metadata: string | null | undefined): ReplayMarker | undefined {
  if (!metadata?.startsWith(PREFIX)) return undefined;
  try {
    const m = JSON.parse(metadata.slice(PREFIX.length)) as Record<string, unknown>;
    if (typeof m.end !== 'string' || !OFFSET.test(m.end)) return undefined;
    if (m.at === undefined) return { end: m.end };
    if (typeof m.at !== 'string' || !OFFSET.test(m.at)) return undefined;
    if (typeof m.starts !== 'number' || !Number.isInteger(m.starts) || m.starts < 0) return undefined;
    return { end: m.end, at: m.at, starts: m.starts };
  } catch {
    return undefined;
  }
}
