import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type AckKind, AckWatermark } from '../../src/ack-watermark.js';

type Sent = { op: 'ack' | 'nack'; tag: number; multiple: boolean; requeue?: boolean };

function recorder() {
  const sent: Sent[] = [];
  let closed = false;
  const target = {
    ack: (m: { fields: { deliveryTag: number } }, multiple?: boolean) => {
      if (closed) throw new Error('Channel closed');
      sent.push({ op: 'ack', tag: m.fields.deliveryTag, multiple: multiple ?? false });
    },
    nack: (m: { fields: { deliveryTag: number } }, multiple?: boolean, requeue?: boolean) => {
      if (closed) throw new Error('Channel closed');
      sent.push({
        op: 'nack',
        tag: m.fields.deliveryTag,
        multiple: multiple ?? false,
        requeue: requeue ?? true,
      });
    },
  };
  return { sent, target, close: () => (closed = true) };
}

/** Replays what a broker would do with the frames: throws on any 406 "unknown delivery tag". */
function brokerAccepts(delivered: number[], sent: Sent[]): Map<number, string> {
  const unacked = new Set(delivered);
  const fate = new Map<number, string>();
  for (const s of sent) {
    if (!unacked.has(s.tag)) throw new Error(`406 PRECONDITION_FAILED - unknown delivery tag ${s.tag}`);
    const tags = s.multiple ? [...unacked].filter((t) => t <= s.tag) : [s.tag];
    for (const t of tags) {
      unacked.delete(t);
      fate.set(t, s.op === 'ack' ? 'ack' : s.requeue ? 'requeue' : 'reject');
    }
  }
  return fate;
}

describe('AckWatermark', () => {
  it('holds acks behind an unsettled tag, then sends one multiple ack', () => {
    const r = recorder();
    const w = new AckWatermark(r.target);
    for (const t of [1, 2, 3, 4]) w.track(t);
    w.settle(2, 'ack');
    w.settle(3, 'ack');
    expect(w.flush()).toBe(0);
    expect(r.sent).toEqual([]);
    w.settle(1, 'ack');
    expect(w.flush()).toBe(3);
    expect(r.sent).toEqual([{ op: 'ack', tag: 3, multiple: true }]);
    expect(w.outstanding).toBe(1);
  });

  it('splits runs at a nack, keeping delivery order', () => {
    const r = recorder();
    const w = new AckWatermark(r.target);
    for (const t of [1, 2, 3, 4]) w.track(t);
    w.settle(1, 'ack');
    w.settle(2, 'requeue');
    w.settle(3, 'ack');
    w.settle(4, 'reject');
    w.flush();
    expect(r.sent).toEqual([
      { op: 'ack', tag: 1, multiple: true },
      { op: 'nack', tag: 2, multiple: false, requeue: true },
      { op: 'ack', tag: 3, multiple: true },
      { op: 'nack', tag: 4, multiple: false, requeue: false },
    ]);
  });

  it('a dead watermark never sends: tags of a lost channel mean nothing on a new one', () => {
    const r = recorder();
    const w = new AckWatermark(r.target);
    w.track(1);
    w.kill();
    expect(w.settle(1, 'ack')).toBe(false);
    expect(w.flush()).toBe(0);
    expect(r.sent).toEqual([]);
  });

  it('dies (and reports) when the channel refuses a send', () => {
    const r = recorder();
    const errors: unknown[] = [];
    const w = new AckWatermark(r.target, (e) => errors.push(e));
    w.track(1);
    w.settle(1, 'ack');
    r.close();
    w.flush();
    expect(w.dead).toBe(true);
    expect(errors).toHaveLength(1);
  });

  it('rejects a double settle and an unknown tag, and tags that do not rise', () => {
    const w = new AckWatermark(recorder().target);
    w.track(5);
    expect(w.settle(5, 'ack')).toBe(true);
    expect(w.settle(5, 'ack')).toBe(false);
    expect(w.settle(6, 'ack')).toBe(false);
    expect(() => w.track(5)).toThrow(RangeError);
  });

  it('property: any completion order and flush schedule is accepted by the broker, each tag settled once as asked', () => {
    const kinds: AckKind[] = ['ack', 'ack', 'ack', 'requeue', 'reject'];
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.nat(), { minLength: 60, maxLength: 60 }),
        fc.array(fc.boolean(), { minLength: 60, maxLength: 60 }),
        fc.array(fc.nat({ max: 4 }), { minLength: 60, maxLength: 60 }),
        (n, order, flushes, kindIdx) => {
          const r = recorder();
          const w = new AckWatermark(r.target);
          const tags = Array.from({ length: n }, (_, i) => i + 1);
          for (const t of tags) w.track(t);
          const perm = [...tags].sort((a, b) => (order[a - 1]! % 97) - (order[b - 1]! % 97) || a - b);
          const asked = new Map<number, AckKind>();
          perm.forEach((t, i) => {
            const k = kinds[kindIdx[t - 1]!]!;
            asked.set(t, k);
            w.settle(t, k);
            if (flushes[i]) w.flush();
          });
          w.flush();
          const fate = brokerAccepts(tags, r.sent);
          expect(w.outstanding).toBe(0);
          for (const t of tags) expect(fate.get(t)).toBe(asked.get(t));
        },
      ),
    );
  });
});
