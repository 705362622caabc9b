import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AdminError } from '../../src/admin/admin-error.js';
import {
  type RepublishDedup,
  republishPlan,
  SQS_FIFO_DEDUP_INTERVAL_MS,
} from '../../src/admin/republish-plan.js';

const key = { consumer: 'c', messageId: 'm' };
const FAILED_AT = new Date('2026-12-01T10:00:00.000Z');
const row = (origin: Record<string, unknown>, nowMs = FAILED_AT.getTime()) => ({
  body: Buffer.from('b'),
  bodyTruncated: false,
  origin,
  failedAt: FAILED_AT,
  now: new Date(nowMs),
});
const FRESH = 'e0b7e0a8-6d3c-4e3e-9b52-5b8f3e1f0c11';

describe('republishPlan: the default destination', () => {
  it.each([
    ['kafka', 'orders-topic'],
    ['sqs', 'http://127.0.0.1:9324/000000000000/orders'],
    ['nats', 'orders.eu'],
  ])('%s: the source it came from', (broker, queue) => {
    expect(republishPlan('s', key, row({ broker, queue, key: 'k' }), {}, FRESH)).toMatchObject({
      destination: queue,
      key: 'k',
    });
  });

  it('rabbitmq: none (a queue is not an exchange)', () => {
    expect(() => republishPlan('s', key, row({ broker: 'rabbitmq', queue: 'q' }), {}, FRESH)).toThrow();
  });

  it("NATS: JetStream's Nats-* headers stay behind, the message's own go with it", () => {
    const plan = republishPlan(
      's',
      key,
      row({
        broker: 'nats',
        queue: 'orders.eu',
        headers: { 'Nats-Msg-Id': 'm', 'Nats-Expected-Last-Sequence': '4', tenant: 't1' },
      }),
      {},
      FRESH,
    );
    expect(plan.headers).toEqual({ tenant: 't1' });
  });
});

describe("republishPlan: past the broker's deduplication of the id", () => {
  const fifo = 'http://127.0.0.1:9324/000000000000/orders.fifo';

  it('NATS: held while JetStream answers duplicate', () => {
    expect(republishPlan('s', key, row({ broker: 'nats', queue: 'o.eu' }), {}, FRESH)).toMatchObject({
      dedup: 'wait-for-window',
      deduplicationId: FRESH,
    });
  });

  it('SQS FIFO read by message-id: a fresh deduplication id', () => {
    const plan = republishPlan('s', key, row({ broker: 'sqs', queue: fifo, idFrom: 'header' }), {}, FRESH);
    expect(plan).toMatchObject({ dedup: 'fresh-deduplication-id', deduplicationId: FRESH });
  });

  it('SQS FIFO read by deduplication id: refused for five minutes after the failure, naming when; then under its own id', () => {
    const origin = { broker: 'sqs', queue: fifo, idFrom: 'deduplication-id' };
    const earliest = FAILED_AT.getTime() + SQS_FIFO_DEDUP_INTERVAL_MS;
    const err = (() => {
      try {
        republishPlan('s', key, row(origin, earliest - 1), {}, FRESH);
      } catch (e) {
        return e;
      }
    })();
    expect(AdminError.is(err)).toBe(true);
    expect((err as AdminError).detail).toEqual({
      code: 'INSIDE_DEDUP_WINDOW',
      consumer: 'c',
      messageId: 'm',
      queue: fifo,
      earliestAt: new Date(earliest),
    });
    expect((err as Error).message).toContain('before 2026-12-01T10:05:00.000Z');
    expect(republishPlan('s', key, row(origin, earliest), {}, FRESH)).toMatchObject({
      dedup: 'window-passed',
      deduplicationId: 'm',
    });
  });

  it('SQS FIFO failed before the consumer recorded where ids come from: as a deduplication-id consumer', () => {
    expect(() => republishPlan('s', key, row({ broker: 'sqs', queue: fifo }), {}, FRESH)).toThrow(
      /INSIDE_DEDUP_WINDOW|before/,
    );
  });

  it('Kafka, SQS standard: nothing to get past', () => {
    for (const origin of [
      { broker: 'kafka', queue: 't' },
      { broker: 'sqs', queue: 'http://h/000/q', idFrom: 'deduplication-id' },
    ]) {
      expect(republishPlan('s', key, row(origin), {}, FRESH)).toMatchObject({ dedup: 'none' });
    }
  });

  it('another destination than the source: marked, a fresh deduplication id, nothing refused', () => {
    const origin = { broker: 'sqs', queue: fifo, idFrom: 'deduplication-id' };
    expect(republishPlan('s', key, row(origin), { destination: 'elsewhere' }, FRESH)).toMatchObject({
      dedup: 'marked',
      deduplicationId: FRESH,
    });
  });
});

// An independent statement of the rule, as a table: who reads the id at the broker it goes back
// to, and what that broker drops.
type Expected = { refused: Date } | { dedup: RepublishDedup; deduplicationId: 'fresh' | 'own' };
function reference(
  origin: { broker: string; queue: string; idFrom: string | undefined },
  destination: string | undefined,
  failedAtMs: number,
  nowMs: number,
): Expected {
  const back = destination === undefined || destination === origin.queue;
  if (!back) return { dedup: 'marked', deduplicationId: 'fresh' };
  const table: Record<string, RepublishDedup | 'by-dedup-id'> = {
    nats: 'wait-for-window',
    'sqs-fifo-header': 'fresh-deduplication-id',
    'sqs-fifo-sqs-message-id': 'fresh-deduplication-id',
    'sqs-fifo-deduplication-id': 'by-dedup-id',
    'sqs-fifo-unknown': 'by-dedup-id',
  };
  const fifo = origin.queue.endsWith('.fifo');
  const known = ['header', 'sqs-message-id', 'deduplication-id'];
  const name =
    origin.broker === 'nats'
      ? 'nats'
      : origin.broker === 'sqs' && fifo
        ? `sqs-fifo-${origin.idFrom !== undefined && known.includes(origin.idFrom) ? origin.idFrom : 'unknown'}`
        : 'other';
  const rule = table[name] ?? 'none';
  if (rule !== 'by-dedup-id') return { dedup: rule, deduplicationId: 'fresh' };
  // Five minutes of SQS dedup from the original's send, which came before the failure.
  if (nowMs - failedAtMs < 5 * 60 * 1000) return { refused: new Date(failedAtMs + 5 * 60 * 1000) };
  return { dedup: 'window-passed', deduplicationId: 'own' };
}

describe('republishPlan against the rule, property', () => {
  it('agrees with the table for any source, destination and clock', () => {
    const origin = fc.record({
      broker: fc.constantFrom('kafka', 'sqs', 'nats', 'rabbitmq', 'test'),
      queue: fc.oneof(
        fc.constantFrom('q', 'q.fifo', 'http://h/000/orders.fifo', 'orders.eu'),
        fc.string({ minLength: 1, maxLength: 12 }),
      ),
      idFrom: fc.option(fc.constantFrom('header', 'deduplication-id', 'sqs-message-id', 'sequence', 'x'), {
        nil: undefined,
      }),
    });
    fc.assert(
      fc.property(
        origin,
        fc.option(fc.constantFrom('same', 'other', 'q.fifo'), { nil: undefined }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: -600_000, max: 900_000 }),
        fc.uuid(),
        fc.string({ minLength: 1, maxLength: 20 }),
        (o, dest, failedAtMs, elapsedMs, fresh, messageId) => {
          const destination = dest === 'same' ? o.queue : dest;
          // RabbitMQ has no default destination: give it one so that the dedup rule is what is tested.
          const options =
            destination === undefined && o.broker !== 'rabbitmq' && o.broker !== 'test'
              ? {}
              : { destination: destination ?? o.queue };
          const source = {
            body: Buffer.from('b'),
            bodyTruncated: false,
            origin:
              o.idFrom === undefined ? { broker: o.broker, queue: o.queue } : { ...o, idFrom: o.idFrom },
            failedAt: new Date(failedAtMs),
            now: new Date(failedAtMs + elapsedMs),
          };
          const k = { consumer: 'c', messageId };
          const want = reference(o, options.destination, failedAtMs, failedAtMs + elapsedMs);
          let got: Expected;
          try {
            const plan = republishPlan('s', k, source, options, fresh);
            expect(plan.deduplicationId === fresh || plan.deduplicationId === messageId).toBe(true);
            got = {
              dedup: plan.dedup,
              deduplicationId: plan.deduplicationId === messageId && messageId !== fresh ? 'own' : 'fresh',
            };
          } catch (err) {
            if (!AdminError.is(err) || err.detail.code !== 'INSIDE_DEDUP_WINDOW') throw err;
            got = { refused: err.detail.earliestAt };
          }
          expect(got).toEqual(want);
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('a republish to an SQS FIFO queue whose consumer reads the deduplication id never goes with a fresh one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3_600_000 }), fc.uuid(), (elapsedMs, fresh) => {
        const origin = { broker: 'sqs', queue: 'http://h/000/o.fifo', idFrom: 'deduplication-id' };
        try {
          const plan = republishPlan('s', key, row(origin, FAILED_AT.getTime() + elapsedMs), {}, fresh);
          expect(plan.deduplicationId).toBe('m');
          expect(elapsedMs).toBeGreaterThanOrEqual(SQS_FIFO_DEDUP_INTERVAL_MS);
        } catch (err) {
          expect(AdminError.is(err) && err.code).toBe('INSIDE_DEDUP_WINDOW');
          expect(elapsedMs).toBeLessThan(SQS_FIFO_DEDUP_INTERVAL_MS);
        }
      }),
    );
  });
});
