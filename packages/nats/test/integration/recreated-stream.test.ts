import { AckPolicy, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { migrate, OnceError } from '@once/core';
import { DEAD_LETTER_RECORD, decodeDeadLetterRecord } from '@once/core/adapter';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createLedger,
  createTestPool,
  dropSchema,
  freshSchemaName,
  type Ledger,
  serviceUrls,
  sleep,
  uniqueName,
  waitFor,
} from '../../../../test/support/index.js';
import {
  createNatsConsumer,
  type NatsConsumer,
  type NatsConsumerOptions,
  NatsErrorCode,
  ORIGINAL_ID_HEADER,
} from '../../src/index.js';

// Broker-made identities after JetStream forgets a stream or a durable: a stream deleted and
// created again under its name numbers its messages from 1 again, and takes its durables with it.
// Every test names its own streams and deletes only those.

const url = serviceUrls().natsUrl;
let pool: pg.Pool;
let schema: string;
let nc: NatsConnection;
let jsm: JetStreamManager;
const schemas: string[] = [];
const streams: string[] = [];
const consumers: NatsConsumer[] = [];

beforeAll(async () => {
  pool = createTestPool({ max: 8 });
  schema = freshSchemaName('nats_rec');
  schemas.push(schema);
  await migrate(pool, { schema });
  nc = await connect({ servers: url, name: uniqueName('nats-rec') });
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  for (const c of consumers) await c.stop().catch(() => {});
  for (const s of streams) await jsm.streams.delete(s).catch(() => {});
  await nc.close();
  for (const s of schemas) await dropSchema(pool, s);
  await pool.end();
});

/** A stream name of this test file, registered for deletion. */
function streamName(prefix: string): string {
  const name = uniqueName(prefix).replace(/[^A-Za-z0-9_-]/g, '_');
  streams.push(name);
  return name;
}

/** (Re)creates the stream capturing `<name>.in.>` and `<name>.dead`; returns its creation time. */
async function createStream(name: string, more: { duplicate_window?: number } = {}): Promise<string> {
  const info = await jsm.streams.add({ name, subjects: [`${name}.in.>`, `${name}.dead`], ...more });
  return info.created;
}

/** Deletes the stream and creates it again under its name, empty. */
async function recreate(name: string): Promise<void> {
  const before = (await jsm.streams.info(name)).created;
  await jsm.streams.delete(name);
  expect(await createStream(name)).not.toBe(before);
}

async function ledger(): Promise<Ledger> {
  const s = freshSchemaName('nats_recfx');
  schemas.push(s);
  return createLedger(pool, s);
}

async function publish(subject: string, body: string): Promise<number> {
  return (await jetstream(nc).publish(subject, body)).seq;
}

function consumer(name: string, patch: Partial<NatsConsumerOptions>): NatsConsumer {
  const c = createNatsConsumer({
    servers: url,
    subject: `${name}.in.>`,
    deadLetterSubject: `${name}.dead`,
    pool,
    schema,
    handlerTimeoutMs: 5_000,
    ackWaitMs: 8_000,
    handler: () => {},
    ...patch,
  } as NatsConsumerOptions);
  consumers.push(c);
  return c;
}

/** A handler recording each run's id and body in `fx`. */
const recording =
  (fx: Ledger): NatsConsumerOptions['handler'] =>
  async (e, { tx, id }) => {
    await fx.record(tx, { messageId: id, key: e.key ?? '', payload: e.body.toString() });
  };

const bodies = async (fx: Ledger) => (await fx.effects()).map((e) => e.payload).sort();

describe("idFrom: 'sequence' on a recreated stream", () => {
  it('recreated while the consumer is stopped: its messages run, none is taken for an old one', async () => {
    const name = streamName('nats-rec-stopped');
    await createStream(name);
    const fx = await ledger();
    const conflicts: string[] = [];
    const durable = 'stopped';
    await publish(`${name}.in.k`, 'a');
    await publish(`${name}.in.k`, 'b');
    const first = consumer(name, { durable, idFrom: 'sequence', handler: recording(fx) });
    await first.start();
    await waitFor('a and b', async () => (await fx.effects()).length === 2, 20_000);
    await first.stop();

    await recreate(name);
    // The same sequences again: 1 with the body 1 had (a duplicate to a bare sequence id), 2
    // with another body (a conflict to a bare sequence id).
    expect(await publish(`${name}.in.k`, 'a')).toBe(1);
    expect(await publish(`${name}.in.k`, 'c')).toBe(2);
    const second = consumer(name, { durable, idFrom: 'sequence', handler: recording(fx) });
    second.inbox.on('message:conflict', (e) => conflicts.push(e.id));
    await second.start();
    await waitFor('the new a and c', async () => (await fx.effects()).length >= 4, 20_000);
    await sleep(300);
    expect(await bodies(fx)).toEqual(['a', 'a', 'b', 'c']);
    expect(conflicts).toEqual([]);
    // Four stored messages, four ids.
    expect(new Set((await fx.effects()).map((e) => e.messageId)).size).toBe(4);
  });

  it('recreated while the consumer runs: it finds the new stream, makes its durable and runs its messages', async () => {
    const name = streamName('nats-rec-running');
    await createStream(name);
    const fx = await ledger();
    const c = consumer(name, { durable: 'running', idFrom: 'sequence', handler: recording(fx) });
    await c.start();
    await publish(`${name}.in.k`, 'a');
    await waitFor('a', async () => (await fx.effects()).length === 1, 20_000);

    await recreate(name);
    expect(await publish(`${name}.in.k`, 'a')).toBe(1);
    expect(await publish(`${name}.in.k`, 'b')).toBe(2);
    await waitFor('the new a and b', async () => (await fx.effects()).length >= 3, 30_000);
    await sleep(300);
    expect(await bodies(fx)).toEqual(['a', 'a', 'b']);
    await waitFor('healthy', async () => c.health().healthy, 10_000);
    const i = await jsm.consumers.info(name, 'running');
    expect(i.num_ack_pending + i.num_pending).toBe(0);
  });
});

it('the stream deleted under a running consumer: unhealthy with NATS_STREAM_NOT_FOUND until a stream captures the subject again', async () => {
  const name = streamName('nats-rec-nostream');
  await createStream(name);
  const fx = await ledger();
  const c = consumer(name, { durable: 'nostream', idFrom: 'sequence', handler: recording(fx) });
  await c.start();
  await publish(`${name}.in.k`, 'a');
  await waitFor('a', async () => (await fx.effects()).length === 1, 20_000);

  await jsm.streams.delete(name);
  await waitFor('unhealthy', async () => !c.health().healthy, 30_000);
  await sleep(1_500);
  expect(c.health()).toMatchObject({
    state: 'running',
    healthy: false,
    lastError: { code: NatsErrorCode.StreamNotFound },
  });

  await createStream(name);
  await publish(`${name}.in.k`, 'b');
  await waitFor('b', async () => (await fx.effects()).length === 2, 30_000);
  await waitFor('healthy again', async () => c.health().healthy, 10_000);
  expect(await bodies(fx)).toEqual(['a', 'b']);
});

describe('a durable deleted under a running consumer', () => {
  it('createConsumer: false: unhealthy with NATS_CONSUMER_NOT_FOUND until it is back, then consumes again', async () => {
    const name = streamName('nats-rec-durable');
    await createStream(name);
    const fx = await ledger();
    const config = {
      durable_name: 'mine',
      ack_policy: AckPolicy.Explicit,
      max_deliver: -1,
      ack_wait: 8_000 * 1e6,
      filter_subject: `${name}.in.>`,
    };
    await jsm.consumers.add(name, config);
    const c = consumer(name, {
      durable: 'mine',
      createConsumer: false,
      idFrom: 'sequence',
      handler: recording(fx),
    });
    await c.start();
    await publish(`${name}.in.k`, 'a');
    await waitFor('a', async () => (await fx.effects()).length === 1, 20_000);
    expect(c.health().healthy).toBe(true);

    await jsm.consumers.delete(name, 'mine');
    await waitFor('unhealthy', async () => !c.health().healthy, 30_000);
    expect(c.health()).toMatchObject({
      state: 'running',
      healthy: false,
      lastError: { code: NatsErrorCode.ConsumerNotFound },
    });
    // Still missing a while later: still unhealthy.
    await sleep(1_500);
    expect(c.health().healthy).toBe(false);

    await jsm.consumers.add(name, config);
    await publish(`${name}.in.k`, 'b');
    await waitFor('b', async () => (await fx.effects()).length >= 2, 30_000);
    await waitFor('healthy again', async () => c.health().healthy, 10_000);
    // The new durable delivers the stream from its start: a is answered as a duplicate.
    await sleep(300);
    expect(await bodies(fx)).toEqual(['a', 'b']);
  });

  it('createConsumer: true: the durable is made again, the replay is answered by the inbox', async () => {
    const name = streamName('nats-rec-remade');
    await createStream(name);
    const fx = await ledger();
    let duplicates = 0;
    const c = consumer(name, { durable: 'made', handler: recording(fx) });
    c.inbox.on('message:duplicate', () => duplicates++);
    await c.start();
    for (const id of ['a', 'b']) await jetstream(nc).publish(`${name}.in.k`, id, { msgID: `${name}-${id}` });
    await waitFor('a and b', async () => (await fx.effects()).length === 2, 20_000);

    await jsm.consumers.delete(name, 'made');
    await jetstream(nc).publish(`${name}.in.k`, 'c', { msgID: `${name}-c` });
    await waitFor('c', async () => (await fx.effects()).length >= 3, 30_000);
    await waitFor('a and b answered again', async () => duplicates >= 2, 10_000);
    expect(await bodies(fx)).toEqual(['a', 'b', 'c']);
    expect((await jsm.consumers.info(name, 'made')).config).toMatchObject({
      ack_policy: 'explicit',
      max_deliver: -1,
    });
    await waitFor('healthy', async () => c.health().healthy, 10_000);
  });
});

it("dead letters of a recreated stream's messages are not taken for the old ones' within the dead-letter stream's duplicate_window", async () => {
  const name = streamName('nats-rec-dl');
  await createStream(name);
  // The dead letters go to a stream of their own, which outlives the consumed one; its
  // duplicate_window is JetStream's default, two minutes.
  const dead = streamName('nats-rec-dead');
  await jsm.streams.add({ name: dead, subjects: [`${dead}.graveyard`] });
  const poison = () => {
    throw new (class extends OnceError {})('PERMANENT', 'bad');
  };
  const deadLettered: string[] = [];
  const make = () => {
    const c = consumer(name, {
      durable: 'dl',
      deadLetterSubject: `${dead}.graveyard`,
      maxAttempts: 1,
      handler: poison,
    });
    c.on('message:dead-lettered', (e) => deadLettered.push(e.id ?? ''));
    return c;
  };
  await jetstream(nc).publish(`${name}.in.k`, 'p', { msgID: `${name}-p` });
  const first = make();
  await first.start();
  await waitFor('p dead-lettered', async () => deadLettered.length === 1, 20_000);
  await first.stop();

  await recreate(name);
  // Sequence 1 again, another message.
  expect((await jetstream(nc).publish(`${name}.in.k`, 'q', { msgID: `${name}-q` })).seq).toBe(1);
  const second = make();
  await second.start();
  await waitFor('q dead-lettered', async () => deadLettered.length === 2, 20_000);
  await waitFor('termed', async () => {
    const i = await jsm.consumers.info(name, 'dl');
    return i.num_ack_pending === 0 && i.num_pending === 0;
  });
  // Both copies are stored.
  expect((await jsm.streams.info(dead)).state.messages).toBe(2);
  const originals: string[] = [];
  for (const seq of [1, 2]) {
    const m = await jsm.streams.getMessage(dead, { seq });
    originals.push(m!.header.get(ORIGINAL_ID_HEADER));
    expect(decodeDeadLetterRecord(m!.header.get(DEAD_LETTER_RECORD))).toMatchObject({ reason: 'permanent' });
  }
  expect(originals).toEqual([`${name}-p`, `${name}-q`]);
});
