/** What the consumer remembers about one partition it reads. */
export interface PartitionState {
  /** The group generation the replay marker was read in; a new assignment reads it again. */
  checkedGeneration: number;
  /**
   * Offsets up to `end` a previous consumer had in flight when it died: they run one at a time,
   * alone in the consumer, their starts counted in Postgres.
   */
  replay: { end: bigint } | undefined;
  /** The message being retried and the attempt it last ran as. */
  retry: { offset: string; attempt: number } | undefined;
  /** Consecutive failures of our own (commit, dead-letter send) on this partition, for backoff. */
  faults: number;
}

/** A fresh partition state. */
export function newPartitionState(): PartitionState {
  return {
    checkedGeneration: -1,
    replay: undefined,
    retry: undefined,
    faults: 0,
  };
}

/** The attempt a message at `offset` runs as: one more than its last retry, else 1. */
export function attemptOf(state: PartitionState, offset: string): number {
  return state.retry?.offset === offset ? state.retry.attempt + 1 : 1;
}
