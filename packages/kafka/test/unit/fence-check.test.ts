import { type FenceRecord, fingerprint } from '@once/core/adapter';
import type { KafkaMessage } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { KafkaErrorCode } from '../../src/errors.js';
import { type Identify, judgeFence } from '../../src/fence-check.js';

function messages(from: number, n: number, prefix = 'id'): KafkaMessage[] {
  return Array.from({ length: n }, (_, k) => ({
    key: null,
    value: Buffer.from(`v${from + k}`),
    headers: { 'message-id': `${prefix}-${from + k}` },
    offset: String(from + k),
    timestamp: '0',
    attributes: 0,
  })) as KafkaMessage[];
}

const identify: Identify = (m) => ({ id: String(m.headers!['message-id']), fp: fingerprint(m.value!) });
const fenceAt = (next: number, lastId?: string, body?: string): FenceRecord => ({
  nextOffset: BigInt(next),
  lastId,
  lastFingerprint: body === undefined ? undefined : fingerprint(body),
});
const judge = (fence: FenceRecord | undefined, batch: KafkaMessage[], hw: number, sought = false) =>
  judgeFence({
    topic: 't',
    partition: 2,
    fence,
    highWatermark: String(hw),
    messages: batch,
    sought,
    identify,
  });

describe('judgeFence', () => {
  it('passes a partition without a fence', () => {
    expect(judge(undefined, messages(0, 3), 3)).toEqual({ kind: 'ok' });
  });

  it('passes when the batch holds the fenced message with its id and body', () => {
    expect(judge(fenceAt(5, 'id-4', 'v4'), messages(2, 6), 8)).toEqual({ kind: 'ok' });
  });

  it('seeks back to the fenced message when the batch starts after it (a normal restart)', () => {
    expect(judge(fenceAt(5, 'id-4', 'v4'), messages(5, 3), 8)).toEqual({ kind: 'seek', offset: '4' });
  });

  it('stops when the fence is past the high watermark', () => {
    const v = judge(fenceAt(7, 'id-6', 'v6'), messages(0, 3), 3);
    expect(v.kind).toBe('mismatch');
    if (v.kind !== 'mismatch') return;
    expect(v.error.code).toBe(KafkaErrorCode.FenceMismatch);
    expect(v.error.message).toMatch(
      /^topic t partition 2: the offset fence is at 7, the log's high watermark at 3; the fence is past the end of the log/,
    );
  });

  it('stops when another message sits at the fence', () => {
    const v = judge(fenceAt(3, 'old-2', 'v2'), messages(0, 6, 'new'), 6);
    expect(v.kind === 'mismatch' && v.error.message).toMatch(
      /offset 2 is id "new-2", but the fence last moved past id "old-2"/,
    );
  });

  it('stops when the id matches but the body does not (ids taken from offsets)', () => {
    const v = judge(fenceAt(3, 'id-2', 'another body'), messages(0, 6), 6);
    expect(v.kind === 'mismatch' && v.error.message).toMatch(/offset 2 is id "id-2" with another body/);
  });

  it('stops when the fenced message is still missing after the seek', () => {
    const v = judge(fenceAt(5, 'id-4', 'v4'), messages(6, 2), 8, true);
    expect(v.kind === 'mismatch' && v.error.message).toMatch(/offset 4, .* is no longer in the log/);
  });

  it('checks only the high watermark on a row from before schema version 7, with a warning', () => {
    const v = judge(fenceAt(5), messages(5, 1), 6);
    expect(v).toMatchObject({ kind: 'ok', warning: expect.stringMatching(/predates schema version 7/) });
    expect(judge(fenceAt(9), messages(0, 1), 6).kind).toBe('mismatch');
  });
});
