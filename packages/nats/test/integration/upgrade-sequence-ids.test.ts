import { fileURLToPath } from 'node:url';
import { type ConsumerConfig, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { migrate } from '@once/core';
import { findInboxRow } from '@once/core/admin';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type Child,
  createLedger,
  createTestPool,
  dropSchema,
  freshSchemaName,
  type Ledger,
  natsAtCommit,
  serviceUrls,
  sleep,
  startChild,
  uniqueName,
  waitFor,
} from '../../../../test/support/index.js';
import { createNatsConsumer, type NatsConsumer, type NatsConsumerOptions } from '../../src/index.js';
import { LEGACY_RECORD_ID } from '../../src/legacy-generation.js';

// Upgrading a consumer with idFrom: 'sequence' from the last build that gave bare sequence ids
// (main 72da536) to this one. The old build runs as a child process from its own compiled copy
// (test/support/core-builds.ts), against the same stream, durable, inbox and effects table.

const OLD = '72da53676d84a3176120b1049e508cf22da0b3e4';
const CHILD = fileURLToPath(new URL('./fixtures/sequence-consumer.mjs', import.meta.url));
const url = serviceUrls().natsUrl;
let oldBuild: string;
let pool: pg.Pool;
let schema: string;
let nc: NatsConnection;
let jsm: JetStreamManager;
const schemas: string[] = [];
const streams: string[] = [];
const consumers: NatsConsumer[] = [];

beforeAll(async () => {
  // About 20 s of CPU from a cold .cache (tsc of core and nats as of OLD), nothing when cached.
  oldBuild = await natsAtCommit(OLD);
  pool = createTestPool({ max: 8 });
  schema = freshSchemaName('nats_up');
  schemas.push(schema);
  await migrate(pool, { schema });
  nc = await connect({ servers: url, name: uniqueName('nats-up') });
  jsm = await jetstreamManager(nc);
}, 300_000);
afterAll(async () => {
  for (const c of consumers) await c.stop().catch(() => {});
  for (const s of streams) await jsm.streams.delete(s).catch(() => {});
  await nc.close();
  for (const s of schemas) await dropSchema(pool, s);
  await pool.end();
});

/** A stream capturing `<name>.in.>` and `<name>.dead`, registered for deletion. */
async function stream(prefix: string): Promise<string> {
  const name = uniqueName(prefix).replace(/[^A-Za-z0-9_-]/g, '_');
  streams.push(name);
  await jsm.streams.add({ name, subjects: [`${name}.in.>`, `${name}.dead`] });
  return name;
}

async function ledger(): Promise<{ fx: Ledger; name: string }> {
  const name = freshSchemaName('nats_upfx');
  schemas.push(name);
  return { fx: await createLedger(pool, name), name };
}

const publish = async (name: string, body: string) => (await jetstream(nc).publish(`${name}.in.k`, body)).seq;

/** The old build consuming `name` as `consumer`, until {@link stopOld}. */
async function startOld(name: string, consumer: string, ledgerSchema: string): Promise<Child> {
  const child = startChild({
    script: CHILD,
    env: {
      NATS_BUILD: oldBuild,
      NATS_URL: url,
      STREAM: name,
      SCHEMA: schema,
      LEDGER: ledgerSchema,
      CONSUMER: consumer,
    },
  });
  await child.waitForLine((l) => (l.json as { ready?: boolean } | undefined)?.ready === true, 60_000);
  return child;
}

async function stopOld(child: Child): Promise<void> {
  await child.kill('SIGTERM');
  expect(child.process?.exitCode).toBe(0);
}

/** Lines of the old build: the settled messages' ids and statuses, in order. */
const settledBy = (child: Child) =>
  child.lines
    .map((l) => l.json as { settled?: string; status?: string } | undefined)
    .filter((j): j is { settled: string; status: string } => j?.settled !== undefined);

function current(name: string, consumer: string, patch: Partial<NatsConsumerOptions> = {}): NatsConsumer {
  const c = createNatsConsumer({
    servers: url,
    subject: `${name}.in.>`,
    deadLetterSubject: `${name}.dead`,
    pool,
    schema,
    consumer,
    idFrom: 'sequence',
    handlerTimeoutMs: 5_000,
    ackWaitMs: 8_000,
    ...patch,
  } as NatsConsumerOptions);
  consumers.push(c);
  return c;
}

const recording =
  (fx: Ledger): NatsConsumerOptions['handler'] =>
  async (e, { tx, id }) => {
    await fx.record(tx, { messageId: id, key: e.key ?? '', payload: e.body.toString() });
  };

const effects = async (fx: Ledger) => (await fx.effects()).map((e) => `${e.messageId}=${e.payload}`);

it('what the old build processed under bare sequence ids still counts; a recreated stream then gets new ids', async () => {
  const name = await stream('nats-up-replay');
  const { fx, name: fxSchema } = await ledger();
  for (const body of ['a', 'b', 'c']) await publish(name, body);
  const old = await startOld(name, 'up', fxSchema);
  await waitFor('the old build settled three', async () => settledBy(old).length === 3, 30_000);
  await stopOld(old);
  expect(settledBy(old)).toEqual(['1', '2', '3'].map((id) => ({ settled: id, status: 'processed' })));

  // The worst case for the upgrade: a new durable, so every old message is delivered again.
  await jsm.consumers.delete(name, 'up');
  expect(await publish(name, 'd')).toBe(4);
  const created = (await jsm.streams.info(name)).created;
  let duplicates = 0;
  const c = current(name, 'up', { handler: recording(fx) });
  c.inbox.on('message:duplicate', () => duplicates++);
  await c.start();
  await waitFor('d', async () => (await fx.effects()).length === 4, 30_000);
  await waitFor('the replay answered', async () => duplicates === 3, 10_000);
  // The stream as the upgrade found it keeps bare ids, whichever build runs its messages.
  expect(await effects(fx)).toEqual(['1=a', '2=b', '3=c', '4=d']);
  const record = await findInboxRow(pool, schema, { consumer: 'up', messageId: LEGACY_RECORD_ID });
  expect(record?.result).toEqual({ stream: name, created });

  // Recreated while the new build runs: the new sequences 1 and 2 are other messages.
  await jsm.streams.delete(name);
  await jsm.streams.add({ name, subjects: [`${name}.in.>`, `${name}.dead`] });
  expect(await publish(name, 'a')).toBe(1);
  expect(await publish(name, 'e')).toBe(2);
  await waitFor('the new a and e', async () => (await fx.effects()).length === 6, 30_000);
  await sleep(300);
  const after = (await fx.effects()).slice(4);
  expect(after.map((e) => e.payload)).toEqual(['a', 'e']);
  expect(after.map((e) => e.messageId)).toEqual([
    expect.stringMatching(/^1@[0-9]{19}$/),
    expect.stringMatching(/^2@[0-9]{19}$/),
  ]);
  expect(duplicates).toBe(3);
  // The record is not rewritten: that stream is gone for good.
  expect((await findInboxRow(pool, schema, { consumer: 'up', messageId: LEGACY_RECORD_ID }))?.result).toEqual(
    {
      stream: name,
      created,
    },
  );
});

it('the legacy stream recreated while the new build is stopped: its messages get new ids at the next start', async () => {
  const name = await stream('nats-up-stopped');
  const { fx, name: fxSchema } = await ledger();
  await publish(name, 'a');
  const old = await startOld(name, 'upstop', fxSchema);
  await waitFor('a', async () => settledBy(old).length === 1, 30_000);
  await stopOld(old);
  const first = current(name, 'upstop', { handler: recording(fx) });
  await first.start();
  await publish(name, 'b');
  await waitFor('b', async () => (await fx.effects()).length === 2, 30_000);
  await first.stop();
  expect(await effects(fx)).toEqual(['1=a', '2=b']);

  await jsm.streams.delete(name);
  await jsm.streams.add({ name, subjects: [`${name}.in.>`, `${name}.dead`] });
  for (const body of ['a', 'b', 'c']) await publish(name, body);
  const second = current(name, 'upstop', { handler: recording(fx) });
  await second.start();
  await waitFor('the new a, b and c', async () => (await fx.effects()).length === 5, 30_000);
  await sleep(300);
  const after = await effects(fx);
  expect(after.slice(0, 2)).toEqual(['1=a', '2=b']);
  expect(after.slice(2).map((e) => e.replace(/@[0-9]{19}=/, '='))).toEqual(['1=a', '2=b', '3=c']);
});

it('what the new build processed in the legacy generation is what the old build would record: the two can run side by side', async () => {
  const name = await stream('nats-up-side');
  const { fx, name: fxSchema } = await ledger();
  await publish(name, 'a');
  // The old build first: the consumer has rows when the new build starts.
  const first = await startOld(name, 'side', fxSchema);
  await waitFor('a', async () => settledBy(first).length === 1, 30_000);
  await stopOld(first);

  const c = current(name, 'side', { handler: recording(fx) });
  await c.start();
  for (const body of ['b', 'c']) await publish(name, body);
  await waitFor('b and c', async () => (await fx.effects()).length === 3, 30_000);
  await c.stop();
  expect(await effects(fx)).toEqual(['1=a', '2=b', '3=c']);

  // The old build again, on a new durable (every message delivered again): it takes what the new
  // build processed for processed, since both claim the same rows, and runs what is new.
  await jsm.consumers.delete(name, 'side');
  await publish(name, 'd');
  const again = await startOld(name, 'side', fxSchema);
  await waitFor('four settled', async () => settledBy(again).length === 4, 30_000);
  await stopOld(again);
  expect(settledBy(again)).toEqual([
    { settled: '1', status: 'duplicate' },
    { settled: '2', status: 'duplicate' },
    { settled: '3', status: 'duplicate' },
    { settled: '4', status: 'processed' },
  ]);
  expect(await effects(fx)).toEqual(['1=a', '2=b', '3=c', '4=d']);
});

it('a stream recreated with its durable between two pulls, while the legacy generation was current: the pull is looked at, not taken for the old stream', async () => {
  const name = await stream('nats-up-swap');
  const { fx, name: fxSchema } = await ledger();
  await publish(name, 'a');
  const old = await startOld(name, 'swap', fxSchema);
  await waitFor('a', async () => settledBy(old).length === 1, 30_000);
  await stopOld(old);

  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let reachedB = false;
  const c = current(name, 'swap', {
    // One message held at a time: while b runs, no pull is in flight.
    batchSize: 1,
    handler: async (e, ctx) => {
      if (e.body.toString() === 'b' && !reachedB) {
        reachedB = true;
        await gate;
      }
      await recording(fx)(e, ctx);
    },
  });
  await c.start();
  expect(await publish(name, 'b')).toBe(2);
  await waitFor('b running', async () => reachedB, 20_000);
  // Another process (or an operator) recreates the stream and the durable meanwhile: no pull of
  // this consumer fails, the next one simply reads the new stream.
  const config = (await jsm.consumers.info(name, 'swap')).config;
  await jsm.streams.delete(name);
  await jsm.streams.add({ name, subjects: [`${name}.in.>`, `${name}.dead`] });
  const { durable_name, ack_policy, max_deliver, ack_wait, max_ack_pending, filter_subject } = config;
  await jsm.consumers.add(name, {
    durable_name,
    ack_policy,
    max_deliver,
    ack_wait,
    max_ack_pending,
    filter_subject,
  } as Partial<ConsumerConfig>);
  // The same sequences and bodies as the old stream's messages.
  expect(await publish(name, 'a')).toBe(1);
  expect(await publish(name, 'b')).toBe(2);
  open();
  await waitFor('the new a and b', async () => (await fx.effects()).length === 4, 30_000);
  await sleep(500);
  // The pull that found the new stream was handed back (nak) whole, so the new a may come after
  // the new b; each ran once, under an id no message of the old stream has.
  expect(await effects(fx)).toEqual([
    '1=a',
    '2=b',
    expect.stringMatching(/^[12]@[0-9]{19}=[ab]$/),
    expect.stringMatching(/^[12]@[0-9]{19}=[ab]$/),
  ]);
  const fresh = (await effects(fx)).slice(2).sort();
  expect(fresh.map((e) => e.replace(/@[0-9]+/, ''))).toEqual(['1=a', '2=b']);
  expect(c.health().healthy).toBe(true);
});
