import { type Envelope, type Logger, OnceError } from '@once/core';
import type { FenceRecord } from '@once/core/adapter';
import type { EachBatchPayload, KafkaMessage } from 'kafkajs';
import { KafkaErrorCode } from './errors.js';
import type { PartitionState } from './partition-state.js';

/** What a partition's first batch of an assignment may do, given its fence. */
export type FenceVerdict =
  /** The log holds the message the fence last moved past (or nothing was fenced): go on. */
  | { kind: 'ok'; warning?: string }
  /** Read the partition from `offset` (the fenced message) first, and judge that batch. */
  | { kind: 'seek'; offset: string }
  /** The fence cannot be trusted on this log: stop the partition, ack nothing. */
  | { kind: 'mismatch'; error: OnceError };

/** The id and fingerprint the inbox gives a message, or undefined when it has no usable id. */
export type Identify = (message: KafkaMessage) => { id: string; fp: Buffer } | undefined;

/**
 * Judges a fence against the log before any offset below it is taken for a duplicate. Offsets
 * are positions, not identities: a deleted and recreated topic numbers them from 0 again, and a
 * fence left by the old topic would turn every new message below it into a "duplicate", acked
 * and never run. So the fence must not be past the partition's high watermark, and the message
 * at `nextOffset - 1` must still be the one the fence moved past (same id, same fingerprint).
 * When that message is not in `messages`, the verdict is to seek to it once (`sought` false);
 * when it is still not there after the seek (retention, compaction, or another log), the fence
 * cannot be verified and the partition stops. A row from before schema version 7 records no id:
 * only the high watermark is checked, with a warning.
 */
export function judgeFence(input: {
  topic: string;
  partition: number;
  fence: FenceRecord | undefined;
  highWatermark: string;
  messages: readonly KafkaMessage[];
  sought: boolean;
  identify: Identify;
}): FenceVerdict {
  const { topic, partition, fence } = input;
  if (!fence || fence.nextOffset === 0n) return { kind: 'ok' };
  const next = fence.nextOffset;
  const hw = BigInt(input.highWatermark);
  const where = `topic ${topic} partition ${partition}: the offset fence is at ${next}, the log's high watermark at ${hw}`;
  const mismatch = (why: string): FenceVerdict => ({
    kind: 'mismatch',
    error: new OnceError(
      KafkaErrorCode.FenceMismatch,
      `${where}; ${why}. The partition is stopped and nothing of it is acknowledged: was the topic deleted and recreated, or its log truncated? If this is a new log, delete the fence row (DELETE FROM <schema>.fences WHERE consumer = '…' AND stream = '${topic}' AND partition = ${partition}) and restart the consumer; every message of the partition then runs as new.`,
      { retryable: false },
    ),
  });
  if (next > hw) return mismatch('the fence is past the end of the log');
  if (fence.lastId === undefined) {
    return {
      kind: 'ok',
      warning: `${where}; the fence row predates schema version 7 and names no message, so only the high watermark was checked`,
    };
  }
  const at = next - 1n;
  const message = input.messages.find((m) => BigInt(m.offset) === at);
  if (!message) {
    if (!input.sought) return { kind: 'seek', offset: at.toString() };
    return mismatch(
      `the message at offset ${at}, which the fence last moved past (id ${JSON.stringify(fence.lastId)}), is no longer in the log (retention or compaction removed it, or this is another log), so the fence cannot be verified`,
    );
  }
  const seen = input.identify(message);
  const sameBody =
    fence.lastFingerprint === undefined ||
    (seen !== undefined && Buffer.compare(seen.fp, Buffer.from(fence.lastFingerprint)) === 0);
  if (seen?.id !== fence.lastId || !sameBody) {
    return mismatch(
      `the message at offset ${at} is ${seen ? `id ${JSON.stringify(seen.id)}` : 'one without a usable id'}${seen?.id === fence.lastId ? ' with another body' : ''}, but the fence last moved past id ${JSON.stringify(fence.lastId)}`,
    );
  }
  return { kind: 'ok' };
}

/** What checking a partition's offset fence needs from the consumer. */
export interface FenceCheckDeps {
  /** The partition's fence in Postgres, if any. */
  read(topic: string, partition: number): Promise<FenceRecord | undefined>;
  /** The id and fingerprint the inbox gives an envelope; undefined when it has no usable id. */
  identify(envelope: Envelope): { id: string; fp: Buffer } | undefined;
  /** Stops the partition for good (pauses it, reports `error`, marks the consumer unhealthy). */
  stop(topic: string, partition: number, error: OnceError): void;
}

/**
 * True when the partition's fence was checked against the log in this assignment and held.
 * Until then nothing of the partition runs, is resolved or committed. Seeks back to the fenced
 * message when the batch does not hold it; stops the partition when the fence does not match.
 */
export async function fenceHolds(ctx: {
  check: FenceCheckDeps;
  state: PartitionState;
  generation: number;
  payload: EachBatchPayload;
  logger: Logger;
  identify: Identify;
  /** Reads the partition again from `offset`. */
  seek(offset: string): void;
}): Promise<boolean> {
  const { check, state, generation, payload } = ctx;
  const { topic, partition } = payload.batch;
  if (state.fenceMismatch) {
    check.stop(topic, partition, state.fenceMismatch);
    return false;
  }
  const mine = state.fence?.generation === generation ? state.fence : undefined;
  if (mine?.verified) return true;
  // A batch fetched before our seek: the next one starts at the fenced message.
  if (payload.isStale()) return false;
  const sought = mine?.sought ?? false;
  const verdict = judgeFence({
    topic,
    partition,
    fence: await check.read(topic, partition),
    highWatermark: payload.batch.highWatermark,
    messages: payload.batch.messages,
    sought,
    identify: ctx.identify,
  });
  if (verdict.kind === 'ok') {
    state.fence = { generation, sought, verified: true };
    if (verdict.warning) ctx.logger.warn({}, `once/kafka: ${verdict.warning}`);
    return true;
  }
  if (verdict.kind === 'seek') {
    state.fence = { generation, sought: true, verified: false };
    ctx.seek(verdict.offset);
    return false;
  }
  state.fenceMismatch = verdict.error;
  check.stop(topic, partition, verdict.error);
  return false;
}
