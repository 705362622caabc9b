import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createHttpInbox, type StoredHttpResponse } from '../../src/adapter/index.js';
import type { HttpResponseToStore } from '../../src/engine/http-response-store.js';
import type { Envelope } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

// createHttpInbox: the response the handler resolves with is stored with the key's COMMIT as SQL
// literals, and comes back as a duplicate's result exactly; what it refuses.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_http_inbox', 4);
});
afterAll(async () => {
  await db?.close();
});

// Text jsonb can hold: no NUL, no lone surrogate (HTTP header values are narrower still).
const text = fc
  .oneof(
    fc.string({ unit: 'grapheme', maxLength: 30 }),
    fc.string({
      unit: fc.constantFrom("'", '\\', '"', ';', '$', 'E', '\n', 'é', '😀', '\\x'),
      maxLength: 20,
    }),
  )
  .filter((s) => !s.includes('\0'));
const response = fc.record({
  status: fc.integer({ min: 100, max: 999 }),
  headers: fc.array(fc.tuple(text, text), { maxLength: 5 }),
  body: fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a)),
  undoWrites: fc.boolean(),
});

let seq = 0;
describe('createHttpInbox', () => {
  it('stores any response with COMMIT and hands it back to the duplicate, byte for byte', async () => {
    let next: HttpResponseToStore | undefined;
    const inbox = createHttpInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'http-inbox.property',
      handler: async () => next!,
    });
    await fc.assert(
      fc.asyncProperty(response, async (r) => {
        next = r;
        const id = `prop-${++seq}`;
        const first = await inbox.process(envelope(id));
        expect(first.status).toBe('processed');
        const dup = await inbox.process(envelope(id));
        expect(dup.status).toBe('duplicate');
        const stored = (dup as { result: StoredHttpResponse }).result;
        expect(stored.status).toBe(r.status);
        expect(stored.headers).toEqual(r.headers);
        expect(Buffer.compare(stored.body, r.body)).toBe(0);
      }),
      { numRuns: 150, seed: 26 },
    );
  });

  it('fails a handler that resolves with something else, and stores nothing', async () => {
    const inbox = createHttpInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'http-inbox.bad',
      handler: async () => ({ status: 'ok' }) as unknown as HttpResponseToStore,
    });
    const e: Envelope = envelope('bad-1');
    const out = await inbox.process(e);
    expect(out.status).toBe('retry');
    const rows = await db.pool.query(`SELECT 1 FROM ${db.schema}.inbox WHERE consumer = 'http-inbox.bad'`);
    expect(rows.rowCount).toBe(0);
  });

  it('refuses storeResult and the caller transactions mode, naming the option', () => {
    const base = { pool: db.pool, schema: db.schema, consumer: 'x', handler: async () => undefined as never };
    expect(() => createHttpInbox({ ...base, storeResult: true })).toThrow(
      /^createHttpInbox: option 'storeResult' /,
    );
    expect(() =>
      createHttpInbox({
        ...base,
        mode: { transactions: { run: async () => undefined, query: async () => ({ rows: [] }) } as never },
      }),
    ).toThrow(/^createHttpInbox: option 'mode' cannot be \{ transactions \}/);
  });
});
