import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { byteaLiteral, quoteLiteral } from '../../src/sql/literal.js';
import { envelope } from './fixtures/db.js';

// The single-message claim sends the id as a literal (one round trip with BEGIN). These tests
// hold that quoting to the only standard that matters: PostgreSQL reads back the exact value.
let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_literal', 4);
});
afterAll(async () => {
  await db.close();
});

const noNul = (s: string) => !s.includes('\0');
const nasty = fc
  .oneof(
    fc.string({ unit: 'grapheme', maxLength: 40 }),
    fc.string({
      unit: fc.constantFrom("'", '\\', '"', ';', '-', '$', 'E', 'x', '\n', '\u00e9', '\u{1F600}'),
      maxLength: 30,
    }),
  )
  .filter(noNul);

for (const scs of ['on', 'off']) {
  it(`quoteLiteral round-trips any string through PostgreSQL (standard_conforming_strings=${scs})`, async () => {
    const client = await db.pool.connect();
    try {
      await client.query(`SET standard_conforming_strings = ${scs}`);
      await client.query('SET escape_string_warning = off');
      await fc.assert(
        fc.asyncProperty(nasty, async (s) => {
          const res = await client.query(`SELECT ${quoteLiteral(s)}::text AS v`);
          expect(res.rows[0].v).toBe(s);
        }),
        { numRuns: 300 },
      );
      const buf = Buffer.from([0, 1, 92, 39, 255]);
      expect((await client.query(`SELECT ${byteaLiteral(buf)} AS b`)).rows[0].b).toEqual(buf);
    } finally {
      client.release();
    }
  });
}

it('refuses NUL instead of cutting the query short', () => {
  expect(() => quoteLiteral('a\0b')).toThrow(/NUL/);
});

it('ids made of quotes, backslashes and SQL are claimed and recognised exactly', async () => {
  const inbox = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: "it's \\ a consumer",
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
    },
  });
  const ids = ["o'brien", "'); DROP TABLE users; --", 'back\\slash\\', "E'\\x27'", '\u{1F600}\'\\"'];
  for (const id of ids) {
    expect(await inbox.process(envelope(id))).toMatchObject({ status: 'processed', id });
    expect(await inbox.process(envelope(id))).toMatchObject({ status: 'duplicate', id });
  }
  const stored = await db.pool.query(`SELECT message_id FROM ${db.schema}.inbox WHERE consumer = $1`, [
    "it's \\ a consumer",
  ]);
  expect(stored.rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
  const counts = await db.counts();
  for (const id of ids) expect(counts.get(id)).toBe(1);
});

it('a batch claims the same ids as literals, in one round trip with BEGIN, and recognises them exactly', async () => {
  const consumer = "batch's \\ consumer";
  const inbox = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer,
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
    },
  });
  const ids = ["o'brien", "'); DROP TABLE users; --", 'back\\slash\\', "E'\\x27'", '\u{1F600}\'\\"', 'plain'];
  const outs = await inbox.processBatch(ids.map((id) => envelope(id)));
  expect(outs.map((o) => [o.status, o.id])).toEqual(ids.map((id) => ['processed', id]));
  const again = await inbox.processBatch(ids.map((id) => envelope(id)));
  expect(again.map((o) => o.status)).toEqual(ids.map(() => 'duplicate'));
  const stored = await db.pool.query(
    `SELECT message_id, fingerprint FROM ${db.schema}.inbox WHERE consumer = $1`,
    [consumer],
  );
  expect(stored.rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
  // The fingerprint stored with each claim is the body's SHA-256, byte for byte.
  for (const r of stored.rows) {
    const body = Buffer.from(JSON.stringify({ id: r.message_id, amount: 10 }));
    expect(r.fingerprint).toEqual(createHash('sha256').update(body).digest());
  }
});
