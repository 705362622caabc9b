import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { ErrorCode, OnceError } from '@once/core';
import {
  MultipleErrors,
  ProtocolError,
  defaultPartitioner as platformaticDefault,
} from '@platformatic/kafka';
import { Partitioners } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { PartitionRevokedError } from '../../src/client/partition-fetcher.js';
import {
  compatiblePartitioner,
  type GroupSupervisorDeps,
  isPlatformaticOwnershipLost,
  superviseGroup,
} from '../../src/client/platformatic.js';
import { platformatic } from '../../src/platformatic.js';

/** kafkajs' DefaultPartitioner for a topic of `n` partitions (Java's choice for a keyed message). */
function kafkajsPartition(key: Buffer, n: number): number {
  const partitioner = Partitioners.DefaultPartitioner();
  const partitionMetadata = Array.from({ length: n }, (_, i) => ({
    partitionId: i,
    leader: 0,
    partitionErrorCode: 0,
    replicas: [0],
    isr: [0],
    offlineReplicas: [],
  }));
  return partitioner({ topic: 't', partitionMetadata, message: { key, value: null } });
}

/** The partition a keyed message gets through the once producer (the library takes the result modulo n). */
function oncePartition(key: Buffer, n: number): number {
  const metadata = { topics: new Map([['t', { partitionsCount: n }]]) };
  return compatiblePartitioner()({ topic: 't' }, key, { metadata }) % n;
}

const keys: Buffer[] = [
  Buffer.from(''),
  Buffer.from('a'),
  Buffer.from('order-1'),
  Buffer.from('order-2'),
  Buffer.from('ключ'),
  Buffer.from('😀 key with emoji'),
  Buffer.from([0, 0, 0, 0]),
  Buffer.from([0xff, 0xfe, 0xfd]),
  ...Array.from({ length: 500 }, (_, i) => randomBytes(1 + (i % 37))),
  ...Array.from({ length: 200 }, (_, i) => Buffer.from(`user-${i}`)),
];

describe('the platformatic producer partitioner', () => {
  it.each([1, 2, 3, 4, 7, 12, 64, 100])(
    'puts every key on the partition kafkajs (and Java) choose, %i partitions',
    (n) => {
      for (const key of keys)
        expect(oncePartition(key, n), key.toString('hex')).toBe(kafkajsPartition(key, n));
    },
  );

  it("differs from @platformatic/kafka's own default for some keys (why once brings its own)", () => {
    const n = 7;
    const differing = keys.filter(
      (key) =>
        (platformaticDefault({ key, value: Buffer.alloc(0), topic: 't' }, key) as number) % n !==
        kafkajsPartition(key, n),
    );
    expect(differing.length).toBeGreaterThan(0);
  });

  it('spreads messages without a key round robin, as kafkajs does, never all on one partition', () => {
    const p = compatiblePartitioner();
    const metadata = { topics: new Map([['t', { partitionsCount: 4 }]]) };
    const got = Array.from({ length: 8 }, () => p({ topic: 't' }, undefined, { metadata }));
    expect(new Set(got).size).toBe(4);
  });
});

describe('isPlatformaticOwnershipLost', () => {
  it.each([
    'REBALANCE_IN_PROGRESS',
    'ILLEGAL_GENERATION',
    'UNKNOWN_MEMBER_ID',
    'FENCED_MEMBER_EPOCH',
    'STALE_MEMBER_EPOCH',
    'FENCED_INSTANCE_ID',
  ])('recognises %s, alone and nested in the library’s MultipleErrors', (id) => {
    const err = new ProtocolError(id);
    expect(isPlatformaticOwnershipLost(err)).toBe(true);
    expect(isPlatformaticOwnershipLost(new MultipleErrors('commit failed', [new Error('x'), err]))).toBe(
      true,
    );
  });

  it('recognises once’s own revocation, and nothing else', () => {
    expect(isPlatformaticOwnershipLost(new PartitionRevokedError('t', 0))).toBe(true);
    for (const other of [
      new ProtocolError('UNKNOWN_TOPIC_OR_PARTITION'),
      new Error('REBALANCE_IN_PROGRESS'),
      { apiId: 42 },
      null,
      undefined,
      'ILLEGAL_GENERATION',
    ])
      expect(isPlatformaticOwnershipLost(other)).toBe(false);
  });

  it('does not loop on an error that contains itself', () => {
    const err = new MultipleErrors('loop', []) as MultipleErrors & { cause?: unknown };
    err.cause = err;
    expect(isPlatformaticOwnershipLost(err)).toBe(false);
  });
});

describe('platformatic(options, defaults)', () => {
  const invalid = (fn: () => unknown): OnceError => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(OnceError);
      expect((err as OnceError).code).toBe(ErrorCode.InvalidOption);
      return err as OnceError;
    }
    throw new Error('did not throw');
  };

  it('names the bad field', () => {
    expect(invalid(() => platformatic(undefined as never)).message).toMatch(/platformatic\(options\)/);
    expect(invalid(() => platformatic([] as never)).message).toMatch(/options must be/);
    expect(invalid(() => platformatic({ bootstrapBrokers: ['h:1'] } as never)).message).toMatch(
      /options\.clientId/,
    );
    expect(invalid(() => platformatic({ clientId: 'c', bootstrapBrokers: [] })).message).toMatch(
      /options\.bootstrapBrokers/,
    );
    expect(invalid(() => platformatic({ clientId: 'c', bootstrapBrokers: 'h:1' } as never)).message).toMatch(
      /options\.bootstrapBrokers/,
    );
    const ok = { clientId: 'c', bootstrapBrokers: ['127.0.0.1:9092'] };
    expect(invalid(() => platformatic(ok, 'consumer' as never)).message).toMatch(/defaults must be/);
    expect(invalid(() => platformatic(ok, { consumer: 'x' } as never)).message).toMatch(/defaults\.consumer/);
    expect(invalid(() => platformatic(ok, { producer: [] } as never)).message).toMatch(/defaults\.producer/);
  });

  it('makes a client without offset-commit metadata, named platformatic', () => {
    const client = platformatic({ clientId: 'c', bootstrapBrokers: ['127.0.0.1:9092'] }, { consumer: {} });
    expect(client.name).toBe('platformatic');
    expect(client.capabilities.commitMetadata).toBe(false);
  });
});

describe("superviseGroup: the library consumer's error", () => {
  /** Our seam with a plain EventEmitter for the library's consumer: what the supervisor did. */
  function supervised(opts: { kip848?: boolean; failJoins?: number } = {}) {
    const emitter = new EventEmitter();
    const log: string[] = [];
    let failJoins = opts.failJoins ?? 0;
    let closing = false;
    const deps: GroupSupervisorDeps = {
      emitter,
      kip848: opts.kip848 ?? false,
      revokeAll: () => log.push('revoke'),
      rejoin: async () => {
        log.push('join');
        if (failJoins-- > 0) throw new Error('joinGroup failed 4 times.');
      },
      report: (error, restart) => log.push(`report ${(error as Error).message} ${restart}`),
      closing: () => closing,
      delayMs: () => 1,
    };
    superviseGroup(deps);
    return { emitter, log, close: () => (closing = true) };
  }
  const settle = () => new Promise((r) => setTimeout(r, 30));
  const groupError = () =>
    new MultipleErrors('joinGroup failed 4 times.', [new ProtocolError('REBALANCE_IN_PROGRESS')]);

  it('is heard (no crash), reported, the assignment revoked and the group joined again', async () => {
    const s = supervised();
    expect(() => s.emitter.emit('error', groupError())).not.toThrow();
    await settle();
    expect(s.log).toEqual(['report joinGroup failed 4 times. true', 'revoke', 'join']);
  });

  it('a failed rejoin is reported and tried again until one succeeds', async () => {
    const s = supervised({ failJoins: 2 });
    s.emitter.emit('error', groupError());
    await settle();
    expect(s.log).toEqual([
      'report joinGroup failed 4 times. true',
      'revoke',
      'join',
      'report joinGroup failed 4 times. true',
      'join',
      'report joinGroup failed 4 times. true',
      'join',
    ]);
  });

  it('another error while rejoining starts no second rejoin', async () => {
    const s = supervised({ failJoins: 1 });
    s.emitter.emit('error', groupError());
    s.emitter.emit('error', groupError());
    await settle();
    expect(s.log.filter((l) => l === 'revoke')).toHaveLength(1);
    expect(s.log.filter((l) => l === 'join')).toHaveLength(2);
  });

  it('KIP-848: reported only (the library heartbeats on); closing: nothing at all', async () => {
    const k = supervised({ kip848: true });
    k.emitter.emit('error', groupError());
    await settle();
    expect(k.log).toEqual(['report joinGroup failed 4 times. true']);
    const c = supervised();
    c.close();
    expect(() => c.emitter.emit('error', groupError())).not.toThrow();
    await settle();
    expect(c.log).toEqual([]);
  });
});
