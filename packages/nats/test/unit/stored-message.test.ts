import type { JsMsg } from '@nats-io/jetstream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { envelopeOf } from '../../src/envelope-of.js';
import { LEGACY_RECORD_ID } from '../../src/legacy-generation.js';
import { deadLetterMsgId, sequenceId, storedAtOf } from '../../src/stored-message.js';

// The names once gives a stored JetStream message: the inbox id with idFrom: 'sequence' and the
// dead-letter copy's Nats-Msg-Id. Each is checked against a reference written here: two stored
// messages get one name only when they are the same message, whatever the sequence, store time,
// stream or durable (names with ':' and '%' included).

const sequence = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER });
/** Store times as JetStream writes them: nanoseconds since the epoch, past 2^53 today. */
const nanos = fc.bigInt({ min: 1n, max: 2n ** 64n - 1n });

/** The reference: a stored message is its sequence and store time (and, for a copy, where it went). */
const same = (a: unknown[], b: unknown[]) => a.length === b.length && a.every((x, i) => x === b[i]);

describe('sequenceId', () => {
  it('is one id per (sequence, store time), and never a bare sequence or the legacy record', () => {
    fc.assert(
      fc.property(sequence, nanos, sequence, nanos, (s1, t1, s2, t2) => {
        const a = sequenceId(s1, t1.toString());
        const b = sequenceId(s2, t2.toString());
        expect(a === b).toBe(same([s1, t1], [s2, t2]));
        expect(a).not.toBe(String(s2));
        expect(a).not.toBe(LEGACY_RECORD_ID);
        expect(a).toBe(`${s1}@${t1}`);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('deadLetterMsgId', () => {
  /** Small domains, so that different tuples whose fields run into each other come up often. */
  const copy = fc.tuple(
    fc.string({ unit: fc.constantFrom('a', ':', '@', '1', '2', '%', '3', 'A'), minLength: 1, maxLength: 5 }),
    fc.integer({ min: 1, max: 3 }),
    fc.bigInt({ min: 1n, max: 3n }),
    fc.string({ unit: fc.constantFrom('d', ':', '@', '1', '2', '%', '3', 'A'), minLength: 1, maxLength: 5 }),
  );
  /** The reference reading: a msgID back into its stream, sequence, store time and durable. */
  function parse(id: string): [string, number, bigint, string] | undefined {
    const parts = id.split(':');
    if (parts.length !== 4 || parts[0] !== 'once-dead') return undefined;
    const m = /^([0-9]+)@([0-9]+)$/.exec(parts[2]!);
    if (!m) return undefined;
    const unescaped = (f: string) => decodeURIComponent(f);
    return [unescaped(parts[1]!), Number(m[1]), BigInt(m[2]!), unescaped(parts[3]!)];
  }

  it('reads back as the stream, sequence, store time and durable it was made of', () => {
    fc.assert(
      fc.property(copy, (x) => {
        expect(parse(deadLetterMsgId(x[0], x[1], x[2].toString(), x[3]))).toEqual(x);
      }),
      { numRuns: 5_000 },
    );
  });

  it('is one msgID per (stream, sequence, store time, durable)', () => {
    fc.assert(
      fc.property(copy, copy, (x, y) => {
        const a = deadLetterMsgId(x[0], x[1], x[2].toString(), x[3]);
        const b = deadLetterMsgId(y[0], y[1], y[2].toString(), y[3]);
        expect(a === b).toBe(same(x, y));
      }),
      { numRuns: 20_000 },
    );
  });

  it("a recreated stream's message at an old sequence gets another msgID", () => {
    const old = deadLetterMsgId('ORDERS', 1, '1796319048122659565', 'billing');
    expect(deadLetterMsgId('ORDERS', 1, '1796319048455823886', 'billing')).not.toBe(old);
    expect(old).toBe('once-dead:ORDERS:1@1796319048122659565:billing');
  });
});

describe('storedAtOf', () => {
  it('is the store time to the nanosecond (no rounding through a JS number)', () => {
    fc.assert(
      fc.property(nanos, (t) => {
        const at = storedAtOf({ timestampNanos: t });
        expect(at).toBe(t.toString());
        expect(BigInt(at!)).toBe(t);
      }),
    );
    // 2^53 + 1 is where a JS number starts to round.
    expect(storedAtOf({ timestampNanos: 2n ** 53n + 1n })).toBe('9007199254740993');
  });

  it('is undefined for a message that did not come from JetStream', () => {
    const notJetStream = {
      get timestampNanos(): bigint {
        throw new Error('unable to parse delivery info - not a jetstream message');
      },
    };
    expect(storedAtOf(notJetStream)).toBeUndefined();
    expect(storedAtOf({ timestampNanos: 0n })).toBeUndefined();
  });
});

describe('envelopeOf ids', () => {
  /** A delivery as envelopeOf reads it; without a store time, one whose ack subject holds none. */
  const delivery = (seq: number, header: string | undefined, storedAt: bigint | undefined): JsMsg =>
    ({
      subject: 'orders.k',
      data: new Uint8Array([1]),
      headers: header === undefined ? undefined : new Map([['Nats-Msg-Id', [header]]]),
      info: { streamSequence: seq, deliveryCount: 1 },
      get timestampNanos(): bigint {
        if (storedAt === undefined)
          throw new Error('unable to parse delivery info - not a jetstream message');
        return storedAt;
      },
    }) as unknown as JsMsg;
  const options = (idFrom: 'header' | 'sequence') => ({ idFrom, idHeader: 'Nats-Msg-Id', durable: 'd' });

  /** The reference: what the id must be for each source and generation. */
  function expected(
    idFrom: 'header' | 'sequence',
    seq: number,
    storedAt: string | undefined,
    legacy: boolean,
    header: string | undefined,
  ): string | undefined {
    if (idFrom === 'header') return header;
    if (legacy) return `${seq}`;
    return storedAt === undefined ? undefined : `${seq}@${storedAt}`;
  }

  it('the header, the bare sequence in the legacy generation, else sequence@store time', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('header' as const, 'sequence' as const),
        sequence,
        fc.option(nanos, { nil: undefined }),
        fc.boolean(),
        fc.option(fc.string({ minLength: 1 }), { nil: undefined }),
        (idFrom, seq, t, legacy, header) => {
          const e = envelopeOf({ m: delivery(seq, header, t), legacy }, options(idFrom));
          const want = expected(idFrom, seq, t?.toString(), legacy, header);
          expect(e.id).toBe(want);
          // Nothing silently takes the place of a missing store time.
          expect(e.idUnusable !== undefined).toBe(
            idFrom === 'sequence' ? want === undefined : (header ?? '').includes('\ufffd'),
          );
          expect(e.source.offset).toBe(String(seq));
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('two stored messages at one sequence of two generations get two ids; in the legacy generation, the old one', () => {
    const id = (storedAt: bigint, legacy: boolean) =>
      envelopeOf({ m: delivery(1, undefined, storedAt), legacy }, options('sequence')).id;
    expect(id(1796319048122659565n, false)).not.toBe(id(1796319048455823886n, false));
    expect(id(1796319048122659565n, true)).toBe('1');
  });
});
