import { AckPolicy, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection, headers as natsHeaders } from '@nats-io/transport-node';
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
  createNatsPublisher,
  type NatsConsumer,
  type NatsConsumerOptions,
  NatsErrorCode,
} from '../../src/index.js';

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
  schema = freshSchemaName('nats_js');
  schemas.push(schema);
  await migrate(pool, { schema });
  nc = await connect({ servers: url, name: uniqueName('nats-test') });
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  for (const c of consumers) await c.stop().catch(() => {});
  for (const s of streams) await jsm.streams.delete(s).catch(() => {});
  await nc.close();
  for (const s of schemas) await dropSchema(pool, s);
  await pool.end();
});

/** A stream capturing `<name>.in.>` and `<name>.dead`. */
async function stream(prefix: string, more: { duplicate_window?: number } = {}): Promise<string> {
  const name = uniqueName(prefix).replace(/[^A-Za-z0-9_-]/g, '_');
  await jsm.streams.add({ name, subjects: [`${name}.in.>`, `${name}.dead`], ...more });
  streams.push(name);
  return name;
}

async function ledger(): Promise<Ledger> {
  const s = freshSchemaName('nats_fx');
  schemas.push(s);
  return createLedger(pool, s);
}

async function publish(subject: string, id: string, body = id): Promise<boolean> {
  const h = natsHeaders();
  h.set('Nats-Msg-Id', id);
  const ack = await jetstream(nc).publish(subject, body, { headers: h });
  return ack.duplicate;
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

const code = async (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (OnceError.is(err) ? err.code : String(err)),
  );

describe('start() refuses what would break the guarantee', () => {
  it('max_deliver other than -1, a non-explicit ack policy, a push consumer, ack_wait not above the handler deadline', async () => {
    const name = await stream('nats-refuse');
    const base = { durable_name: 'x', filter_subject: `${name}.in.>` };
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['md', { ack_policy: AckPolicy.Explicit, max_deliver: 5 }, /max_deliver is 5; it must be -1/],
      ['none', { ack_policy: AckPolicy.None }, /ack_policy is 'none'/],
      ['all', { ack_policy: AckPolicy.All }, /ack_policy is 'all'/],
      [
        'short',
        { ack_policy: AckPolicy.Explicit, ack_wait: 2_000 * 1e6 },
        /ack_wait is 2000 ms, not above handlerTimeoutMs \(5000 ms\)/,
      ],
      [
        'other',
        { ack_policy: AckPolicy.Explicit, filter_subject: `${name}.in.a` },
        /filters '.*\.in\.a', not subject/,
      ],
    ];
    for (const [durable, config, message] of cases) {
      await jsm.consumers.add(name, { ...base, ...config, durable_name: durable });
      const c = consumer(name, { durable });
      const err = await c.start().catch((e: unknown) => e);
      expect(OnceError.is(err) && err.code).toBe(NatsErrorCode.ConsumerConfig);
      expect(String((err as Error).message)).toMatch(message);
      expect(c.state).toBe('failed');
    }
  });

  it('a subject no stream captures, a dead-letter subject no stream captures or the consumer receives', async () => {
    const name = await stream('nats-nostream');
    expect(await code(consumer(name, { subject: `${name}-nowhere.x` }).start())).toBe(
      NatsErrorCode.StreamNotFound,
    );
    expect(await code(consumer(name, { deadLetterSubject: `${name}-nowhere.dead` }).start())).toBe(
      NatsErrorCode.StreamNotFound,
    );
    expect(await code(consumer(name, { deadLetterSubject: `${name}.in.dead`, durable: 'dl' }).start())).toBe(
      NatsErrorCode.ConsumerConfig,
    );
    expect(await code(consumer(name, { createConsumer: false, durable: 'absent' }).start())).toBe(
      NatsErrorCode.ConsumerNotFound,
    );
  });

  it('creates the durable with explicit acks, max_deliver -1 and ack_wait above the deadline', async () => {
    const name = await stream('nats-create');
    // No ackWaitMs: handlerTimeoutMs (5 s) + 10 s.
    const c = createNatsConsumer({
      servers: url,
      subject: `${name}.in.>`,
      deadLetterSubject: `${name}.dead`,
      durable: 'made',
      maxAckPending: 7,
      pool,
      schema,
      handlerTimeoutMs: 5_000,
      handler: () => {},
    });
    consumers.push(c);
    await c.start();
    const info = await jsm.consumers.info(name, 'made');
    expect(info.config).toMatchObject({ ack_policy: 'explicit', max_deliver: -1, max_ack_pending: 7 });
    expect(info.config.ack_wait).toBe(15_000 * 1e6);
    await c.stop();
  });
});

it('order through a nak in the middle, with maxAckPending: 1', async () => {
  const name = await stream('nats-order');
  const fx = await ledger();
  const ids = Array.from({ length: 20 }, (_, i) => `${name}-${i}`);
  for (const id of ids) await publish(`${name}.in.k`, id);
  let failed = false;
  const c = consumer(name, {
    maxAckPending: 1,
    retryDelayMs: () => 300,
    handler: async (e, { tx, id }) => {
      if (id === ids[7] && !failed) {
        failed = true;
        throw new Error('transient, once');
      }
      await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
    },
  });
  await c.start();
  await waitFor('20 effects', async () => (await fx.effects()).length >= 20, 30_000);
  const verdict = await fx.check({ expectedIds: ids, checkOrderPerKey: true });
  expect(failed).toBe(true);
  expect(verdict.orderViolations).toEqual([]);
  expect(verdict.ok).toBe(true);
  expect((await fx.effects()).map((e) => e.messageId)).toEqual(ids);
});

it('a failed dead-letter publish naks and never terms; the copy lands once the subject is captured again', async () => {
  const name = await stream('nats-dlfail');
  const deadStream = `${name}_dead`;
  await jsm.streams.add({ name: deadStream, subjects: [`${name}.graveyard`] });
  streams.push(deadStream);
  const errors: string[] = [];
  let deadLettered = 0;
  const c = consumer(name, {
    deadLetterSubject: `${name}.graveyard`,
    handler: () => {
      throw new (class extends OnceError {})('PERMANENT', 'bad');
    },
    maxAttempts: 1,
  });
  c.on('error', (e) => errors.push(e.where));
  c.on('message:dead-lettered', () => deadLettered++);
  await c.start();
  // The dead-letter stream stops capturing the subject: publishes there get no PubAck.
  await jsm.streams.update(deadStream, { subjects: [`${name}.elsewhere`] });
  await publish(`${name}.in.k`, `${name}-poison`);
  await waitFor(
    'two failed dead-letter publishes',
    async () => errors.filter((w) => w === 'dead-letter').length >= 2,
    30_000,
  );
  expect(deadLettered).toBe(0);
  const pending = await jsm.consumers.info(name, c.options.durable);
  // Naked, not termed: JetStream still holds it for this consumer.
  expect(pending.num_ack_pending + pending.num_pending).toBe(1);
  expect(pending.num_redelivered).toBeGreaterThanOrEqual(1);
  await jsm.streams.update(deadStream, { subjects: [`${name}.graveyard`] });
  await waitFor('the dead letter', async () => deadLettered === 1, 30_000);
  const m = await jsm.streams.getMessage(deadStream, { last_by_subj: `${name}.graveyard` });
  const record = decodeDeadLetterRecord(m!.header.get(DEAD_LETTER_RECORD));
  // It failed on its first run (permanent); the copy that finally lands says so on its return.
  expect(record).toMatchObject({
    id: `${name}-poison`,
    reason: 'previously-failed',
    consumer: c.options.consumer,
  });
  await waitFor('settled', async () => {
    const i = await jsm.consumers.info(name, c.options.durable);
    return i.num_ack_pending === 0 && i.num_pending === 0;
  });
});

it('deadLetterSubject: false terms a failed message and logs it at error level, saying what keeps it', async () => {
  const name = await stream('nats-dloff');
  const lines: { fields: Record<string, unknown>; message: string }[] = [];
  const noop = () => {};
  const events: { id: string | undefined; deadLetter: string | undefined; recorded: boolean }[] = [];
  const c = consumer(name, {
    deadLetterSubject: false,
    logger: {
      debug: noop,
      info: noop,
      warn: noop,
      error: (fields, message) => lines.push({ fields, message }),
    },
    handler: () => {
      throw new (class extends OnceError {})('PERMANENT', 'bad');
    },
    maxAttempts: 1,
  });
  c.on('message:dead-lettered', (e) =>
    events.push({ id: e.id, deadLetter: e.deadLetter, recorded: e.recorded }),
  );
  await c.start();
  await publish(`${name}.in.k`, `${name}-poison`);
  // No Nats-Msg-Id: an invalid id, which has no failed row to keep it.
  await jetstream(nc).publish(`${name}.in.k`, 'no id');
  await waitFor('both dropped', async () => events.length === 2, 20_000);
  expect(events).toEqual(
    expect.arrayContaining([
      { id: `${name}-poison`, deadLetter: undefined, recorded: true },
      { id: undefined, deadLetter: undefined, recorded: false },
    ]),
  );
  const dropped = lines.filter((l) => l.message.includes('dead-lettering is off'));
  expect(dropped).toHaveLength(2);
  expect(dropped.find((l) => l.fields.id === `${name}-poison`)?.message).toContain('once failed list');
  expect(dropped.find((l) => l.fields.id === undefined)?.message).toContain('NOT recorded');
  expect(dropped.every((l) => l.fields.stream === name && typeof l.fields.sequence === 'number')).toBe(true);
  await waitFor('termed', async () => {
    const i = await jsm.consumers.info(name, c.options.durable);
    return i.num_ack_pending === 0 && i.num_pending === 0;
  });
});

it('a connection of your own that closes turns the consumer unhealthy with NATS_CONNECTION_CLOSED', async () => {
  const name = await stream('nats-closed');
  const own = await connect({ servers: url, name: uniqueName('own') });
  const c = createNatsConsumer({
    connection: own,
    subject: `${name}.in.>`,
    deadLetterSubject: `${name}.dead`,
    pool,
    schema,
    handlerTimeoutMs: 5_000,
    ackWaitMs: 8_000,
    handler: () => {},
  });
  consumers.push(c);
  await c.start();
  expect(c.health().healthy).toBe(true);
  await own.close();
  await waitFor('unhealthy', async () => !c.health().healthy, 10_000);
  expect(c.health().lastError).toMatchObject({ code: NatsErrorCode.ConnectionClosed, where: 'connection' });
  await c.stop();
  expect(c.state).toBe('stopped');
});

it('batch mode: one transaction per fetched batch', async () => {
  const name = await stream('nats-batch');
  const fx = await ledger();
  const ids = Array.from({ length: 30 }, (_, i) => `${name}-${i}`);
  for (const id of ids) await publish(`${name}.in.k`, id);
  const txs = new Map<string, number>();
  const c = consumer(name, {
    batch: true,
    batchSize: 10,
    handler: async (e, { tx, id }) => {
      const { rows } = await tx.query<{ x: string }>('SELECT txid_current()::text AS x');
      txs.set(rows[0]!.x, (txs.get(rows[0]!.x) ?? 0) + 1);
      await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
    },
  });
  await c.start();
  await waitFor('30 effects', async () => (await fx.effects()).length >= 30, 30_000);
  const sizes = [...txs.values()];
  expect(sizes.reduce((a, b) => a + b, 0)).toBe(30);
  expect(Math.max(...sizes)).toBeLessThanOrEqual(10);
  // Pre-published messages arrive in pulls of batchSize: far fewer transactions than messages.
  expect(sizes.length).toBeLessThanOrEqual(10);
  expect((await fx.check({ expectedIds: ids })).ok).toBe(true);
});

/** A promise the test opens: a handler waits on it. */
function gate(): { wait: () => Promise<void>; open: () => void } {
  let open!: () => void;
  const p = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait: () => p, open };
}

describe('batch mode pulls the next batch while one runs', () => {
  const ids = (name: string, n: number) =>
    Array.from({ length: n }, (_, i) => `${name}-${String(i).padStart(2, '0')}`);

  it('at most one batch ahead; it is acked only after its own COMMIT; effects in stream order', async () => {
    const name = await stream('nats-ahead');
    const fx = await ledger();
    const all = ids(name, 20);
    for (const id of all) await publish(`${name}.in.k`, id);
    const first = gate();
    const sixth = gate();
    let reachedSixth = false;
    const txs = new Map<string, number>();
    const c = consumer(name, {
      batch: true,
      batchSize: 5,
      handler: async (e, { tx, id }) => {
        if (id === all[0]) await first.wait();
        if (id === all[5]) {
          reachedSixth = true;
          await sixth.wait();
        }
        const { rows } = await tx.query<{ x: string }>('SELECT txid_current()::text AS x');
        txs.set(rows[0]!.x, (txs.get(rows[0]!.x) ?? 0) + 1);
        await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
      },
    });
    const info = () => jsm.consumers.info(name, c.options.durable);
    await c.start();
    // The first batch runs (waiting at its first message) and the next one is already held.
    await waitFor('a batch running and one ahead', async () => (await info()).num_ack_pending === 10, 20_000);
    await sleep(300);
    // Not more than one batch ahead, and nothing acked or committed.
    expect(c.health().held).toBe(10);
    let i = await info();
    expect(i.num_ack_pending).toBe(10);
    expect(i.num_pending).toBe(10);
    expect(i.ack_floor.stream_seq).toBe(0);
    expect(await fx.effects()).toHaveLength(0);

    first.open();
    // What committed is acked; the batch holding the sixth message waits, and nothing of it (or
    // behind it) is acked before its COMMIT, while the next pull keeps one batch ahead of it.
    await waitFor(
      'the first batch committed and acked, the next waiting',
      async () => reachedSixth && (await info()).ack_floor.stream_seq === (await fx.effects()).length,
      20_000,
    );
    await sleep(300);
    const committed = (await fx.effects()).map((e) => e.messageId);
    expect(committed.length).toBeGreaterThan(0);
    expect(committed.length).toBeLessThanOrEqual(5);
    expect(committed).toEqual(all.slice(0, committed.length));
    i = await info();
    expect(i.ack_floor.stream_seq).toBe(committed.length);
    expect(i.num_ack_pending).toBe(c.health().held);
    expect(i.num_ack_pending + i.num_pending + committed.length).toBe(20);

    sixth.open();
    await waitFor('20 effects', async () => (await fx.effects()).length >= 20, 30_000);
    await waitFor('all acked', async () => {
      const x = await info();
      return x.num_ack_pending === 0 && x.num_pending === 0;
    });
    // Concurrency 1: batches run one after another in stream order, the one pulled ahead included.
    expect((await fx.effects()).map((e) => e.messageId)).toEqual(all);
    expect((await fx.check({ expectedIds: all, checkOrderPerKey: true })).ok).toBe(true);
    const sizes = [...txs.values()];
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(20);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(5);
    expect((await info()).num_redelivered).toBe(0);
  });

  it('stop() with a batch pulled ahead: it still runs, and is acked after its COMMIT', async () => {
    const name = await stream('nats-ahead-stop');
    const fx = await ledger();
    const all = ids(name, 20);
    for (const id of all) await publish(`${name}.in.k`, id);
    const first = gate();
    const c = consumer(name, {
      batch: true,
      batchSize: 5,
      handler: async (e, { tx, id }) => {
        if (id === all[0]) await first.wait();
        await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
      },
    });
    await c.start();
    await waitFor('a batch running and one ahead', async () => c.health().held === 10, 20_000);
    const stopped = c.stop();
    await sleep(200);
    expect(c.state).toBe('stopping');
    first.open();
    await stopped;
    // Both held batches ran and were acked; nothing was pulled after stop().
    expect((await fx.effects()).map((e) => e.messageId)).toEqual(all.slice(0, 10));
    await waitFor('the held ten acked', async () => {
      const x = await jsm.consumers.info(name, c.options.durable);
      return x.num_ack_pending === 0 && x.ack_floor.stream_seq === 10 && x.num_pending === 10;
    });
    // The rest goes to the next consumer on the durable, once each, in order.
    const next = consumer(name, {
      batch: true,
      batchSize: 5,
      handler: async (e, { tx, id }) => {
        await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
      },
    });
    await next.start();
    await waitFor('20 effects', async () => (await fx.effects()).length >= 20, 30_000);
    expect((await fx.effects()).map((e) => e.messageId)).toEqual(all);
    expect((await fx.check({ expectedIds: all, checkOrderPerKey: true })).ok).toBe(true);
  });

  it('past stopTimeoutMs, a batch pulled ahead never starts and is left unacked for redelivery', async () => {
    const name = await stream('nats-ahead-deadline');
    const fx = await ledger();
    const all = ids(name, 10);
    for (const id of all) await publish(`${name}.in.k`, id);
    const first = gate();
    const ran: string[] = [];
    const opts = { batch: true, batchSize: 5, handlerTimeoutMs: 2_000, ackWaitMs: 3_000 };
    const c = consumer(name, {
      ...opts,
      stopTimeoutMs: 200,
      handler: async (e, { tx, id }) => {
        ran.push(id);
        if (id === all[0]) await first.wait();
        await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
      },
    });
    await c.start();
    await waitFor('a batch running and one ahead', async () => c.health().held === 10, 20_000);
    // The first batch outlives the stop deadline: stop() closes without waiting for it.
    await c.stop();
    expect(c.state).toBe('stopped');
    first.open();
    await waitFor('the first batch committed', async () => (await fx.effects()).length > 0, 10_000);
    await sleep(500);
    // Only (part of) the first batch ever ran; the batch pulled ahead never started.
    expect(ran).toContain(all[0]);
    expect(ran.every((id) => all.slice(0, 5).includes(id))).toBe(true);
    expect((await fx.effects()).every((e) => all.slice(0, 5).includes(e.messageId))).toBe(true);
    // Nothing acked (the first batch's acks met a closed connection): all ten come back.
    const i = await jsm.consumers.info(name, c.options.durable);
    expect(i.ack_floor.stream_seq).toBe(0);
    expect(i.num_ack_pending).toBe(10);
    const redelivered: string[] = [];
    const next = consumer(name, {
      ...opts,
      handler: async (e, { tx, id }) => {
        if (e.redelivered) redelivered.push(id);
        await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
      },
    });
    await next.start();
    await waitFor('10 effects', async () => (await fx.effects()).length >= 10, 30_000);
    // After ack_wait: each of them once, the committed ones answered as duplicates.
    expect((await fx.check({ expectedIds: all })).ok).toBe(true);
    for (const id of all.slice(5)) expect(redelivered).toContain(id);
  });

  it('a batch pulled ahead that waits past ack_wait is kept alive, not redelivered', async () => {
    const name = await stream('nats-ahead-alive');
    const fx = await ledger();
    const all = ids(name, 6);
    for (const id of all) await publish(`${name}.in.k`, id);
    let redelivered = 0;
    const c = consumer(name, {
      batch: true,
      batchSize: 3,
      handlerTimeoutMs: 2_000,
      ackWaitMs: 3_000,
      handler: async (e, { tx, id }) => {
        if (e.redelivered) redelivered++;
        // The first batch takes 3.6 s: the one pulled behind it waits longer than ack_wait.
        if (all.slice(0, 3).includes(id)) await sleep(1_200);
        await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
      },
    });
    await c.start();
    await waitFor('6 effects', async () => (await fx.effects()).length >= 6, 30_000);
    expect(redelivered).toBe(0);
    expect((await jsm.consumers.info(name, c.options.durable)).num_redelivered).toBe(0);
    expect((await fx.check({ expectedIds: all, checkOrderPerKey: true })).ok).toBe(true);
  });
});

it('held messages are kept alive with working(): waiting past ack_wait, none is redelivered', async () => {
  const name = await stream('nats-keepalive');
  const fx = await ledger();
  const ids = Array.from({ length: 6 }, (_, i) => `${name}-${i}`);
  for (const id of ids) await publish(`${name}.in.k`, id);
  let redelivered = 0;
  const c = consumer(name, {
    handlerTimeoutMs: 2_000,
    ackWaitMs: 3_000,
    batchSize: 6,
    handler: async (e, { tx, id }) => {
      if (e.redelivered) redelivered++;
      // Six handlers of 1.2 s one after another: the last waits 6 s buffered, twice ack_wait.
      await sleep(1_200);
      await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
    },
  });
  await c.start();
  await waitFor('6 effects', async () => (await fx.effects()).length >= 6, 30_000);
  expect(redelivered).toBe(0);
  expect((await jsm.consumers.info(name, c.options.durable)).num_redelivered).toBe(0);
  expect((await fx.check({ expectedIds: ids })).ok).toBe(true);
});

it('ids: Nats-Msg-Id by default; a copy outside duplicate_window reaches the consumer and the inbox answers it', async () => {
  const name = await stream('nats-ids', { duplicate_window: 200 * 1e6 });
  const fx = await ledger();
  const publisher = createNatsPublisher({ servers: url });
  const out = (id: string) => ({
    id,
    destination: `${name}.in.k`,
    key: undefined,
    body: Buffer.from(id),
    headers: {},
  });
  expect(await publisher.publish([out(`${name}-a`)])).toEqual([{ id: `${name}-a`, ok: true }]);
  // Within the window JetStream drops the copy, and its PubAck says duplicate: counted as sent.
  expect(await publisher.publishOne(out(`${name}-a`))).toEqual({ duplicate: true });
  await sleep(400);
  expect(await publisher.publishOne(out(`${name}-a`))).toEqual({ duplicate: false });
  await publisher.stop();
  let duplicates = 0;
  const c = consumer(name, {
    handler: async (e, { tx, id }) => {
      await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
    },
  });
  c.inbox.on('message:duplicate', () => duplicates++);
  await c.start();
  await waitFor('the copy answered', async () => duplicates === 1, 20_000);
  expect((await fx.check({ expectedIds: [`${name}-a`] })).ok).toBe(true);
});

it("idFrom 'sequence': the stream sequence and the message's store time are the id", async () => {
  const name = await stream('nats-seq');
  const seen: string[] = [];
  const c = consumer(name, { idFrom: 'sequence', handler: (_e, { id }) => void seen.push(id) });
  await jetstream(nc).publish(`${name}.in.k`, 'one');
  await jetstream(nc).publish(`${name}.in.k`, 'two');
  await c.start();
  await waitFor('two', async () => seen.length === 2, 20_000);
  // A consumer with no inbox rows before it first started has no legacy generation: no id is bare.
  const stored = async (seq: number) =>
    `${seq}@${nanosOf((await jsm.streams.getMessage(name, { seq }))!.timestamp)}`;
  expect(seen).toEqual([await stored(1), await stored(2)]);
});

/** An RFC 3339 time with up to nine fraction digits, in ns since the epoch (a Date keeps ms only). */
function nanosOf(iso: string): string {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(iso);
  if (!m) throw new Error(`not an RFC 3339 UTC time: ${iso}`);
  const seconds = BigInt(Date.parse(`${m[1]}Z`)) / 1000n;
  return (seconds * 1_000_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'))).toString();
}

it('started before migrate(): fetches nothing, unhealthy; begins once the schema checks out', async () => {
  const name = await stream('nats-nodb');
  const later = freshSchemaName('nats_later');
  schemas.push(later);
  const fx = await ledger();
  const ids = [`${name}-1`, `${name}-2`, `${name}-3`];
  for (const id of ids) await publish(`${name}.in.k`, id);
  const c = consumer(name, {
    schema: later,
    handler: async (e, { tx, id }) => {
      await fx.record(tx, { messageId: id, key: e.key ?? '', payload: '' });
    },
  });
  await c.start();
  expect(c.health()).toMatchObject({ state: 'running', healthy: false, available: false });
  await sleep(1_500);
  const info = await jsm.consumers.info(name, c.options.durable);
  // Nothing handed out, nothing spent: JetStream still has every message pending.
  expect(info.num_ack_pending).toBe(0);
  expect(info.num_pending).toBe(3);
  expect(info.num_redelivered).toBe(0);
  await migrate(pool, { schema: later });
  await waitFor('3 effects', async () => (await fx.effects()).length >= 3, 30_000);
  expect((await fx.check({ expectedIds: ids })).ok).toBe(true);
  await waitFor('healthy', async () => c.health().healthy, 10_000);
});
