import type { Envelope, Outcome } from '@once/core';
import { settlePlanOf } from '@once/core/adapter';
import type { Message } from 'amqplib';
import { describe, expect, it } from 'vitest';
import { envelopeOf } from '../../src/envelope-of.js';
import { queueTypeHint } from '../../src/errors.js';
import { stringHeaders } from '../../src/headers.js';
import { republishOptions } from '../../src/republish.js';
import { tierFor } from '../../src/topology.js';

function message(props: Partial<Message['properties']> = {}, redelivered = false): Message {
  return {
    content: Buffer.from('{"a":1}'),
    fields: { deliveryTag: 1, redelivered, exchange: '', routingKey: 'orders' },
    properties: { headers: {}, ...props } as Message['properties'],
  };
}

const env: Envelope = {
  id: 'x',
  body: Buffer.from(''),
  headers: {},
  source: { broker: 'rabbitmq', queue: 'q' },
  attempt: 2,
  redelivered: false,
};
const error = { name: 'Error', message: 'boom' };

describe('envelopeOf', () => {
  it('takes properties.messageId first, then the id header', () => {
    expect(
      envelopeOf(message({ messageId: 'm1', headers: { 'message-id': 'h1' } }), 'q', 'message-id').id,
    ).toBe('m1');
    expect(envelopeOf(message({ headers: { 'message-id': 'h1' } }), 'q', 'message-id').id).toBe('h1');
    expect(envelopeOf(message(), 'q', 'message-id').id).toBeUndefined();
  });

  it("reads attempts from our own header and redelivered from the broker's flag", () => {
    const e = envelopeOf(
      message({ headers: { 'x-once-attempt': 3, 'x-delivery-count': 9 } }),
      'q',
      'message-id',
    );
    expect(e.attempt).toBe(3);
    expect(e.redelivered).toBe(false);
    expect(envelopeOf(message({ headers: { 'x-once-attempt': 'junk' } }), 'q', 'id').attempt).toBe(1);
    expect(envelopeOf(message({}, true), 'q', 'id')).toMatchObject({ redelivered: true, key: 'orders' });
  });
});

describe('envelopeOf, ids its client decoded', () => {
  it('marks an id holding U+FFFD unusable, and gives any other id no idUnusable at all', () => {
    const bad = envelopeOf(message({ messageId: 'a\ufffdb' }), 'q', 'message-id');
    expect(bad.idUnusable).toMatch(/U\+FFFD/);
    const good = envelopeOf(message({ messageId: 'ab' }), 'q', 'message-id');
    expect('idUnusable' in good).toBe(false);
    expect(good).toMatchObject({ id: 'ab', attempt: 1, source: { broker: 'rabbitmq', queue: 'q' } });
  });
});

describe('stringHeaders', () => {
  it("reads a table's own keys only", () => {
    const table = Object.assign(Object.create({ inherited: 'no' }), { own: 'yes' });
    expect(stringHeaders(table)).toEqual({ own: 'yes' });
    expect(stringHeaders(undefined)).toEqual({});
  });

  it('turns AMQP table values into strings', () => {
    expect(
      stringHeaders({ a: 'x', b: 2, c: true, d: Buffer.from('hi'), e: [{ count: 1 }], f: null }),
    ).toEqual({
      a: 'x',
      b: '2',
      c: 'true',
      d: 'hi',
      e: '[{"count":1}]',
    });
  });
});

describe('settlePlanOf and tiers', () => {
  const tiers = [1000, 10000, 60000];
  it('picks the smallest tier at least as long as the delay, else the longest', () => {
    expect(tierFor(0, tiers)).toBe(1000);
    expect(tierFor(1000, tiers)).toBe(1000);
    expect(tierFor(1001, tiers)).toBe(10000);
    expect(tierFor(999_999, tiers)).toBe(60000);
  });

  it('maps outcomes to ack, retry (attempt + 1 when the handler spent it), rerun and dead-letter', () => {
    const o = (x: Partial<Outcome> & Pick<Outcome, 'status'>) =>
      ({ envelope: env, id: 'x', ...x }) as Outcome;
    // What the channel consumer does: core's plan, a retry's delay rounded up to a tier.
    const plan = (x: Partial<Outcome> & Pick<Outcome, 'status'>) => {
      const p = settlePlanOf(o(x), { consumer: 'c', recordFailed: true });
      return p.kind === 'retry'
        ? { kind: 'retry', tierMs: tierFor(p.delayMs, tiers), attempt: p.attempt }
        : p;
    };
    expect(plan({ status: 'processed', result: undefined })).toEqual({
      kind: 'ack',
      id: 'x',
      outcome: 'processed',
    });
    expect(plan({ status: 'duplicate', result: undefined })).toEqual({
      kind: 'ack',
      id: 'x',
      outcome: 'duplicate',
    });
    expect(plan({ status: 'retry', error, delayMs: 2000, spent: true })).toEqual({
      kind: 'retry',
      tierMs: 10000,
      attempt: 3,
    });
    expect(plan({ status: 'not-run', why: 'behind', error, delayMs: 0 } as Outcome)).toEqual({
      kind: 'rerun',
      id: 'x',
      outcome: 'not-run',
    });
    expect(plan({ status: 'not-run', why: 'unavailable', error, delayMs: 500 } as Outcome)).toEqual({
      kind: 'retry',
      tierMs: 1000,
      attempt: 2,
    });
    // A database fault: the handler ran but the failure was not the message's.
    expect(plan({ status: 'retry', error, delayMs: 0, spent: false })).toMatchObject({ attempt: 2 });
    expect(plan({ status: 'busy', delayMs: 1000 })).toMatchObject({ kind: 'retry', attempt: 2 });
    expect(plan({ status: 'failed', reason: 'permanent', error })).toMatchObject({
      kind: 'dead-letter',
      record: { reason: 'permanent', error, attempts: 2, consumer: 'c', id: 'x' },
    });
    expect(plan({ status: 'conflict', action: 'dead-letter' })).toMatchObject({
      record: { reason: 'conflict' },
    });
    expect(plan({ status: 'conflict', action: 'ack' })).toEqual({
      kind: 'ack',
      id: 'x',
      outcome: 'conflict',
    });
  });
});

describe('republishOptions', () => {
  it('keeps the producer properties, drops broker headers and userId, adds ours, persistent', () => {
    const p = republishOptions(
      message({
        messageId: 'm',
        contentType: 'application/json',
        userId: 'guest',
        expiration: '100',
        headers: { keep: 'y', 'x-death': [], 'x-delivery-count': 2 },
      }),
      { 'x-once-attempt': 2 },
    );
    expect(p).toEqual({
      persistent: true,
      messageId: 'm',
      contentType: 'application/json',
      headers: { keep: 'y', 'x-once-attempt': 2 },
    });
  });
});

describe('queueTypeHint: which queueType matches the queue that exists', () => {
  it.each([
    [
      "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received the value 'quorum' of type 'longstr' but current is none",
      "queue 'orders' exists as a classic queue, and a queue's type cannot change: pass queueType: 'classic' to consume it as it is",
    ],
    [
      "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received 'classic' but current is 'quorum'",
      "pass queueType: 'quorum' to consume it as it is",
    ],
    [
      "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received 'quorum' but current is 'stream'",
      "queue 'orders' exists as a stream queue, and a queue's type cannot change: once consumes quorum and classic queues only",
    ],
  ])('%s', (message, hint) => {
    expect(queueTypeHint(message)).toContain(hint);
  });

  it('says nothing for another refusal', () => {
    expect(
      queueTypeHint(
        "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'orders.retry.1000ms' in vhost '/': received the value '1000' of type 'signedint' but current is none",
      ),
    ).toBeUndefined();
    expect(queueTypeHint("ACCESS_REFUSED - access to queue 'orders' refused")).toBeUndefined();
  });
});
