import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox, type Handler, type QueryResultLike } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_qconfig', 8);
});
afterAll(async () => {
  await db.close();
});

describe('ctx.tx takes pg query-config objects', () => {
  for (const mode of ['transaction', 'lease'] as const) {
    it(`${mode}: { text, values }, rowMode 'array' and a named statement commit with the claim`, async () => {
      let arrays: QueryResultLike<unknown[]> | undefined;
      const handler: Handler = async (e, { tx }) => {
        await tx.query({ text: `INSERT INTO ${db.effects} (id) VALUES ($1)`, values: [e.id] });
        // A named statement is prepared once per pooled connection and reused by later messages.
        await tx.query({ name: `${db.schema}_ins`, text: `INSERT INTO ${db.effects} (id) VALUES ($1)` }, [
          `${e.id}-named`,
        ]);
        arrays = await tx.query<unknown[]>({
          text: `SELECT id, seq FROM ${db.effects} WHERE id = $1`,
          values: [e.id],
          rowMode: 'array',
        });
      };
      const inbox = createInbox({ pool: db.pool, schema: db.schema, consumer: `qc-${mode}`, handler, mode });
      for (const id of [`${mode}-1`, `${mode}-2`, `${mode}-3`]) {
        expect(await inbox.process(envelope(id))).toMatchObject({ status: 'processed' });
        expect(arrays!.rows[0]![0]).toBe(id);
        const counts = await db.counts();
        expect([counts.get(id), counts.get(`${id}-named`)]).toEqual([1, 1]);
      }
    });
  }

  it('a handler that throws after a query-config write leaves nothing', async () => {
    const handler: Handler = async (e, { tx }) => {
      await tx.query({ text: `INSERT INTO ${db.effects} (id) VALUES ($1)`, values: [e.id] });
      throw new Error('boom');
    };
    const inbox = createInbox({ pool: db.pool, schema: db.schema, consumer: 'qc-throw', handler });
    expect(await inbox.process(envelope('qc-throw-1'))).toMatchObject({ status: 'retry' });
    expect((await db.counts()).get('qc-throw-1')).toBeUndefined();
  });

  it('refuses a config without string text, naming it', async () => {
    let error: unknown;
    const handler: Handler = async (_e, { tx }) => {
      error = await tx.query({ text: 42 as unknown as string }).catch((err: unknown) => err);
    };
    const inbox = createInbox({ pool: db.pool, schema: db.schema, consumer: 'qc-bad', handler });
    await inbox.process(envelope('qc-bad-1'));
    expect(error).toMatchObject({ code: 'INVALID_OPTION' });
    expect(String((error as Error).message)).toContain('`text`');
  });

  it('a late query-config query after the deadline is refused (TX_REVOKED)', async () => {
    let late: unknown;
    const handler: Handler = async (e, { tx }) => {
      await new Promise((r) => setTimeout(r, 300));
      late = await tx
        .query({ text: `INSERT INTO ${db.effects} (id) VALUES ($1)`, values: [e.id] })
        .catch((err) => err);
    };
    const inbox = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'qc-late',
      handler,
      handlerTimeoutMs: 50,
    });
    expect(await inbox.process(envelope('qc-late-1'))).toMatchObject({ status: 'retry' });
    await new Promise((r) => setTimeout(r, 400));
    expect(late).toMatchObject({ code: 'TX_REVOKED' });
    expect((await db.counts()).get('qc-late-1')).toBeUndefined();
  });
});
