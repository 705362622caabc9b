/**
 * What a consumer was doing on a partition, kept in the metadata of the group's committed offset
 * (durable in Kafka, written in the same request that commits progress). After a restart it says
 * which offsets were in flight when the last consumer died: they run one at a time, and how often
 * each was started is counted in Postgres (`Inbox.noteStart`), not here, because the count must
 * not rise for a message that was merely running beside the killer on another partition.
 */
export interface ReplayMarker {
  /** Last offset (inclusive) of the range in flight; the range starts at the committed offset. */
  end: string;
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
    return { end: m.end };
  } catch {
    return undefined;
  }
}
