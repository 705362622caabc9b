import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createRelay, migrate, type OutboxMessage, PermanentError, type Relay } from '@once/core';
import {
  createNatsConsumer,
  createNatsPublisher,
  type NatsConsumer,
  NatsErrorCode,
  type NatsPublisher,
} from '@once/nats';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cli } from '../../packages/cli/test/integration/fixtures/cli.js';
import {
  createLedger,
  createTestPool,
  dropSchema,
  freshSchemaName,
  type Ledger,
  quoteIdent,
  serviceUrls,
  uniqueName,
  waitFor,
} from '../support/index.js';

// `once failed retry --republish` of a message that came from NATS, inside the stream's
// duplicate_window. The republish goes under the message's own id, the Nats-Msg-Id its consumer
// reads, which JetStream already holds from the original: it answers the publish with a PubAck
// that says duplicate, and drops the copy. Counted as sent (as before schema version 10), the
// failed record was gone and the message never ran again. Now the relay holds the row until the
// window has passed and sends it then: it runs once.

const url = serviceUrls().natsUrl;
// Long enough that the operator's retry and the relay's first publish fall inside it on a loaded
// machine (they take a few seconds); short enough for a test.
const WINDOW_MS = 15_000;
let pool: pg.Pool;
let nc: NatsConnection;
let jsm: JetStreamManager;
let schema: string;
let ledger: Ledger;
const streams: string[] = [];
let consumer: NatsConsumer | undefined;
let publisher: NatsPublisher | undefined;
let relay: Relay | undefined;

beforeAll(async () => {
  pool = createTestPool({ max: 8 });
  schema = freshSchemaName('republish_nats');
  await migrate(pool, { schema });
  ledger = await createLedger(pool, schema);
  nc = await connect({ servers: url, name: uniqueName('republish-nats') });
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  await relay?.stop();
  await consumer?.stop();
  await publisher?.stop();
  for (const s of streams) await jsm.streams.delete(s).catch(() => {});
  await nc.close();
  await dropSchema(pool, schema);
  await pool.end();
});

async function stream(prefix: string, windowMs: number): Promise<string> {
  const name = uniqueName(prefix).replace(/[^A-Za-z0-9_-]/g, '_');
  await jsm.streams.add({
    name,
    subjects: [`${name}.in.>`, `${name}.dead`],
    duplicate_window: windowMs * 1e6,
  });
  streams.push(name);
  return name;
}

it('the publisher: a duplicate PubAck counts as sent for a message, not for a republish, which is held for the stream window', async () => {
  const name = await stream('republish-pub', 60_000);
  const p = createNatsPublisher({ servers: url });
  try {
    const message = (id: string, republish?: OutboxMessage['republish']): OutboxMessage => ({
      id,
      destination: `${name}.in.k`,
      key: undefined,
      body: Buffer.from(id),
      headers: {},
      ...(republish ? { republish } : {}),
    });
    expect(await p.publish([message('a')])).toEqual([{ id: 'a', ok: true }]);
    // The relay's own re-send of a row the stream already stored: delivered, counted as sent.
    expect(await p.publish([message('a')])).toEqual([{ id: 'a', ok: true }]);
    // A republish under the same id: JetStream drops it, so it is not sent.
    const [held] = await p.publish([message('a', { deduplicationId: 'x' })]);
    expect(held).toMatchObject({ id: 'a', ok: false, retryable: true, retryAfterMs: 61_000 });
    expect(held?.ok === false && (held.error as { code?: string }).code).toBe(NatsErrorCode.DuplicateWindow);
    // A republish of an id the stream does not hold goes as any message.
    expect(await p.publish([message('b', { deduplicationId: 'y' })])).toEqual([{ id: 'b', ok: true }]);
    expect((await jsm.streams.info(name)).state.messages).toBe(2);
  } finally {
    await p.stop();
  }
});

it('a failed message republished inside duplicate_window is held until the window has passed, then runs once', {
  timeout: 120_000,
}, async () => {
  const name = await stream('republish-e2e', WINDOW_MS);
  const subject = `${name}.in.orders`;
  let fixed = false;
  consumer = createNatsConsumer({
    servers: url,
    subject: `${name}.in.>`,
    deadLetterSubject: `${name}.dead`,
    consumer: 'orders',
    pool,
    schema,
    maxAttempts: 1,
    handlerTimeoutMs: 5_000,
    ackWaitMs: 8_000,
    handler: async (envelope, { tx, id }) => {
      if (!fixed) throw new PermanentError('price service says no');
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: 'ok' });
    },
  });
  await consumer.start();
  const sentAt = Date.now();
  const ack = await jetstream(nc).publish(subject, '{"order":7}', { msgID: 'order-7' });
  expect(ack.duplicate).toBe(false);
  const status = async () =>
    (
      await pool.query<{ status: string }>(
        `SELECT status FROM ${quoteIdent(schema)}.inbox WHERE consumer = 'orders' AND message_id = 'order-7'`,
      )
    ).rows[0]?.status;
  await waitFor('the message to be recorded failed', async () => (await status()) === 'failed', 30_000);

  fixed = true;
  const r = await cli(['--schema', schema, '--json', 'failed', 'retry', 'orders', 'order-7', '--republish']);
  expect(r.code, r.stderr).toBe(0);
  expect(r.json()).toMatchObject({
    deleted: true,
    republished: { destination: subject, dedup: 'wait-for-window' },
  });

  publisher = createNatsPublisher({ servers: url });
  relay = createRelay({ pool, schema, publishers: { [subject]: publisher }, pollIntervalMs: 200 });
  const held: { code: unknown; attempts: number }[] = [];
  relay.on('outbox:publish-failed', (e) => held.push({ code: e.error.code, attempts: e.attempts }));
  await relay.start();
  await waitFor('the republished message to be processed', async () => (await status()) === 'done', 90_000);
  const ranAt = Date.now();
  // It was held, not counted as sent: the first publish came inside the window.
  expect(held[0]).toEqual({ code: NatsErrorCode.DuplicateWindow, attempts: 0 });
  expect(ranAt - sentAt).toBeGreaterThanOrEqual(WINDOW_MS);
  const rows = await pool.query(
    `SELECT status, attempts FROM ${quoteIdent(schema)}.outbox WHERE message_id = 'order-7'`,
  );
  // One counted attempt: the send that JetStream stored; the hold counted none.
  expect(rows.rows).toEqual([{ status: 'sent', attempts: 1 }]);
  expect((await ledger.check({ expectedIds: ['order-7'] })).ok).toBe(true);
  expect((await ledger.effects()).length).toBe(1);
});
