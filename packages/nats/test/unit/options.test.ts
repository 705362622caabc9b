import type { PgPoolLike } from '@once/core';
import { describe, expect, it } from 'vitest';
import { resolveNatsConsumerOptions } from '../../src/options.js';
import { NatsPublisher } from '../../src/publisher.js';
import { subjectMatches, versionAtLeast } from '../../src/setup.js';

const pool = { connect: async () => ({}), query: async () => ({}) } as unknown as PgPoolLike;
const base = { servers: 'nats://127.0.0.1:4222', subject: 'orders.>', pool, handler: () => {} };

describe('resolveNatsConsumerOptions', () => {
  it('applies defaults and splits off the inbox options', () => {
    const { nats, inbox } = resolveNatsConsumerOptions({ ...base, maxAttempts: 3 });
    expect(nats).toMatchObject({
      servers: ['nats://127.0.0.1:4222'],
      subject: 'orders.>',
      durable: 'orders__',
      consumer: 'orders__',
      createConsumer: true,
      maxAckPending: 1000,
      concurrency: 1,
      batch: false,
      batchSize: 20,
      idFrom: 'header',
      idHeader: 'Nats-Msg-Id',
      deadLetterSubject: 'once.dead.orders__',
      stopTimeoutMs: 30000,
    });
    expect(nats.ackWaitMs).toBeUndefined();
    expect(inbox).toMatchObject({ maxAttempts: 3 });
    expect('subject' in inbox).toBe(false);
  });

  it('names the durable after the consumer when given', () => {
    const { nats } = resolveNatsConsumerOptions({ ...base, consumer: 'billing.v2' });
    expect(nats).toMatchObject({
      consumer: 'billing.v2',
      durable: 'billing_v2',
      deadLetterSubject: 'once.dead.billing_v2',
    });
  });

  it.each([
    [{ subject: '' }, "option 'subject'"],
    [{ subject: 'a..b' }, "option 'subject'"],
    [{ durable: 'a.b' }, "option 'durable'"],
    [{ stream: 'has space' }, "option 'stream'"],
    [{ batchSize: 0 }, "option 'batchSize'"],
    [{ concurrency: 0 }, "option 'concurrency'"],
    [{ maxAckPending: 0 }, "option 'maxAckPending'"],
    [{ ackWaitMs: 10 }, "option 'ackWaitMs'"],
    [{ idFrom: 'offset' }, "option 'idFrom'"],
    [{ deadLetterSubject: 'a b' }, "option 'deadLetterSubject'"],
    [{ connection: {} }, "option 'servers'"],
    [{ servers: undefined }, "option 'servers'"],
    [{ maxDeliver: 5 }, "createNatsConsumer: option 'maxDeliver' is unknown"],
    [{ batchSzie: 5 }, "did you mean 'batchSize'?"],
  ])('refuses %o naming %s', (bad, field) => {
    expect(() => resolveNatsConsumerOptions({ ...base, ...bad } as never)).toThrow(field);
  });

  it('takes deadLetterSubject: false', () => {
    expect(resolveNatsConsumerOptions({ ...base, deadLetterSubject: false }).nats.deadLetterSubject).toBe(
      false,
    );
  });
});

describe('subjectMatches', () => {
  it.each([
    ['orders.>', 'orders.a', true],
    ['orders.>', 'orders.a.b', true],
    ['orders.>', 'orders', false],
    ['orders.*', 'orders.a', true],
    ['orders.*', 'orders.a.b', false],
    ['orders.in', 'orders.in', true],
    ['orders.in', 'orders.dead', false],
    ['*.dead', 'once.dead', true],
  ])('%s matches %s: %s', (filter, subject, want) => {
    expect(subjectMatches(filter, subject)).toBe(want);
  });
});

describe('versionAtLeast', () => {
  it.each([
    ['2.9.10', true],
    ['2.9.0', true],
    ['2.10.4', true],
    ['2.8.4', false],
    ['2.9.0-beta.1', true],
    [undefined, false],
  ])('%s ≥ 2.9.0: %s', (v, want) => {
    expect(versionAtLeast(v, '2.9.0')).toBe(want);
  });
});

describe('NatsPublisher options', () => {
  it('wants servers or a connection, not both', () => {
    expect(() => new NatsPublisher({})).toThrow("option 'servers'");
    expect(() => new NatsPublisher({ servers: 'nats://x', publishTimeoutMs: 0 })).toThrow('publishTimeoutMs');
  });
});
