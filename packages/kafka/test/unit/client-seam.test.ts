import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { OnceError } from '@once/core';
import { describe, expect, it } from 'vitest';
import {
  type ClientProducer,
  createKafkaPublisher,
  KAFKA_CLIENT,
  type KafkaClient,
  type KafkaConsumerOptions,
  type OutgoingMessage,
} from '../../src/index.js';
import { resolveKafkaConsumerOptions } from '../../src/options.js';

/** A fake of our own seam (no broker): records what the adapter asks of its producer. */
function fakeClient() {
  const sent: { topic: string; messages: OutgoingMessage[] }[][] = [];
  const timeouts: (number | undefined)[] = [];
  const producer: ClientProducer = {
    async connect() {},
    async send(topicMessages, options) {
      sent.push(topicMessages);
      timeouts.push(options?.timeoutMs);
    },
    async disconnect() {},
  };
  const client: KafkaClient = {
    [KAFKA_CLIENT]: true,
    name: 'fake',
    capabilities: { commitMetadata: false },
    consumer: () => {
      throw new Error('not in this test');
    },
    producer: () => producer,
    admin: () => {
      throw new Error('not in this test');
    },
    isOwnershipLost: () => false,
  };
  return { client, sent, timeouts };
}

const base = { groupId: 'g', topics: ['t'], pool: {} as never, handler: () => {} };

describe('the client seam', () => {
  it('a client made for the seam is used as given', () => {
    const { client } = fakeClient();
    const o = resolveKafkaConsumerOptions({ ...base, kafka: client } as KafkaConsumerOptions).kafka;
    expect(o.kafka).toBe(client);
  });

  it('a raw kafkajs Kafka instance becomes the kafkajs client', () => {
    const raw = { consumer: () => ({}), producer: () => ({}), admin: () => ({}) };
    const o = resolveKafkaConsumerOptions({ ...base, kafka: raw } as never).kafka;
    expect(o.kafka.name).toBe('kafkajs');
    expect(o.kafka.capabilities.commitMetadata).toBe(true);
  });

  it('anything else is INVALID_OPTION saying what to write', () => {
    let err: unknown;
    try {
      resolveKafkaConsumerOptions({ ...base, kafka: { brokers: ['x'] } } as never);
    } catch (e) {
      err = e;
    }
    expect(OnceError.is(err) && err.code).toBe('INVALID_OPTION');
    expect((err as Error).message).toMatch(
      /kafkajs\(new Kafka\(\{ brokers \}\)\) from '@once\/kafka\/kafkajs'/,
    );
    expect(() => createKafkaPublisher({ kafka: {} as never })).toThrow(/@once\/kafka\/kafkajs/);
  });

  it('the publisher sends through the client: one call per publish, ids in the header, the ack timeout', async () => {
    const { client, sent, timeouts } = fakeClient();
    const publisher = createKafkaPublisher({ kafka: client, ackTimeoutMs: 1234 });
    const results = await publisher.publish([
      { id: 'a', destination: 't1', body: 'x', key: 'k' },
      { id: 'b', destination: 't2', body: Buffer.from('y') },
    ]);
    expect(results).toEqual([
      { id: 'a', ok: true },
      { id: 'b', ok: true },
    ]);
    expect(sent).toEqual([
      [
        { topic: 't1', messages: [{ key: 'k', value: 'x', headers: { 'message-id': 'a' } }] },
        { topic: 't2', messages: [{ key: null, value: Buffer.from('y'), headers: { 'message-id': 'b' } }] },
      ],
    ]);
    expect(timeouts).toEqual([1234]);
    await publisher.stop();
  });
});

describe('the main entry and kafkajs (an optional peer)', () => {
  const dist = (file: string) => fileURLToPath(new URL(`../../dist/${file}`, import.meta.url));
  /**
   * Runs `code` in a child Node whose resolution of `kafkajs` fails, for ESM imports (a resolve
   * hook) and for require (Module._resolveFilename), as where kafkajs is not installed.
   */
  function withoutKafkajs(code: string): string {
    const hook = `export async function resolve(s, c, next) {
      if (s === 'kafkajs' || s.startsWith('kafkajs/')) throw new Error('kafkajs is blocked');
      return next(s, c);
    }`;
    const prelude = `
      import { register, createRequire } from 'node:module';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}));
      const Module = createRequire(import.meta.url)('node:module');
      const orig = Module._resolveFilename;
      Module._resolveFilename = function (r, ...rest) {
        if (r === 'kafkajs' || r.startsWith('kafkajs/')) throw new Error('kafkajs is blocked');
        return orig.call(this, r, ...rest);
      };
    `;
    return execFileSync(process.execPath, ['--input-type=module', '-e', prelude + code], {
      encoding: 'utf8',
      timeout: 30_000,
    });
  }

  it('@once/kafka loads, and makes a consumer and a publisher over a non-kafkajs client, without kafkajs', () => {
    const out = withoutKafkajs(`
      const m = await import(${JSON.stringify(dist('index.js'))});
      const client = { [m.KAFKA_CLIENT]: true, name: 'fake', capabilities: { commitMetadata: false },
        consumer() {}, admin() {}, isOwnershipLost: () => false,
        producer: () => ({ connect: async () => {}, send: async () => {}, disconnect: async () => {} }) };
      m.createKafkaConsumer({ kafka: client, groupId: 'g', topics: ['t'], pool: { connect() {}, query() {} }, handler: () => {} });
      const p = m.createKafkaPublisher({ kafka: client });
      await p.publish([{ id: 'a', destination: 't', body: 'x' }]);
      console.log('loaded', typeof m.createKafkaConsumer);
    `);
    expect(out.trim()).toBe('loaded function');
  });

  it('control: the block works (@once/kafka/kafkajs cannot load without kafkajs)', () => {
    expect(() => withoutKafkajs(`await import(${JSON.stringify(dist('kafkajs.js'))});`)).toThrow(
      /kafkajs is blocked/,
    );
  });
});

describe('kafkajs() from @once/kafka/kafkajs', () => {
  it('wraps a kafkajs Kafka instance and refuses anything else', async () => {
    const { kafkajs } = await import('../../src/kafkajs.js');
    const client = kafkajs({ consumer: () => ({}), producer: () => ({}), admin: () => ({}) } as never);
    expect(client.name).toBe('kafkajs');
    expect(() => kafkajs({} as never)).toThrow(/must be a kafkajs Kafka instance/);
  });
});
