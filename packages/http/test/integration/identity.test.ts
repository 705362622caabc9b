import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BINDING_NAMES, type BindingApp, startBinding } from '../support/in-process.js';

// Request identity through every binding (issue #26, items 2 and 3): the same key with another
// resource, other query parameters, a number that differs past a double's digits, or other
// invalid UTF-8 bytes is a 422 key-mismatch and runs nothing; the same request spelled otherwise
// (key order, number spelling, percent-encoding case) is the replay.

/** A parsed JSON body, read field by field. */
type Json = Record<string, unknown>;

describe.each(BINDING_NAMES)('%s binding: what is the same request', (name) => {
  let app: BindingApp;
  beforeAll(async () => {
    app = await startBinding(name);
  });
  afterAll(async () => {
    await app?.close();
  });

  let n = 0;
  const newKey = () => `id-${name}-${++n}-${Math.random().toString(36).slice(2)}`;

  const expectMismatch = async (res: Response) => {
    expect(res.status).toBe(422);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(((await res.json()) as Json).type).toMatch(/#key-mismatch$/);
  };

  it("answers 422 to one key sent to another account's charges, and runs nothing there (item 2)", async () => {
    const key = newKey();
    const a = await app.post('/accounts/A/charges', key);
    expect(a.status).toBe(201);
    const b = await app.post('/accounts/B/charges', key);
    await expectMismatch(b);
    expect(await app.effects(key)).toBe(1);
    // A's own retry still gets A's answer
    const again = await app.post('/accounts/A/charges', key);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });

  if (name === 'express') {
    it('answers 422 for another account behind a Router mounted at a prefix (item 2)', async () => {
      const key = newKey();
      expect((await app.post('/api/accounts/A/charges', key)).status).toBe(201);
      await expectMismatch(await app.post('/api/accounts/B/charges', key));
      // the same pattern outside the router is another target too
      await expectMismatch(await app.post('/accounts/A/charges', key));
      expect(await app.effects(key)).toBe(1);
    });
  }

  it('answers 422 when only the query string differs, or its order (item 3a)', async () => {
    const key = newKey();
    expect((await app.post('/charges?currency=eur&capture=true', key)).status).toBe(201);
    await expectMismatch(await app.post('/charges?currency=usd&capture=true', key));
    await expectMismatch(await app.post('/charges?capture=true&currency=eur', key));
    await expectMismatch(await app.post('/charges', key));
    expect(await app.effects(key)).toBe(1);
    // the same query with its percent-encodings spelled otherwise is the same target
    const same = await app.post('/charges?%63urrency=eur&capture=true', key);
    expect(same.status).toBe(201);
    expect(same.headers.get('idempotent-replayed')).toBe('true');
  });

  it('answers 422 when a number differs past the 15th significant digit around a decimal point (item 3b)', async () => {
    const key = newKey();
    const first = await app.post('/charges', key, { body: '{"amount":1234567890.1234567}' });
    expect(first.status).toBe(201);
    await expectMismatch(await app.post('/charges', key, { body: '{"amount":1234567890.1234568}' }));
    expect(await app.effects(key)).toBe(1);
    // the same exact value spelled otherwise is the same body
    const same = await app.post('/charges', key, { body: '{ "amount": 12345678901234567e-7 }' });
    expect(same.status).toBe(201);
    expect(same.headers.get('idempotent-replayed')).toBe('true');
  });

  it('answers 422 when a JSON body differs only in invalid UTF-8 bytes (item 3c)', async () => {
    const key = newKey();
    const body = (b: number) =>
      Buffer.concat([Buffer.from('{"amount":7,"note":"'), Buffer.from([b]), Buffer.from('"}')]);
    // every binding's JSON parser decodes both with U+FFFD: the route sees one note
    expect((await app.post('/charges', key, { body: body(0xff) })).status).toBe(201);
    await expectMismatch(await app.post('/charges', key, { body: body(0xfe) }));
    await expectMismatch(await app.post('/charges', key, { body: '{"amount":7,"note":"\ufffd"}' }));
    const same = await app.post('/charges', key, { body: body(0xff) });
    expect(same.headers.get('idempotent-replayed')).toBe('true');
    expect(await app.effects(key)).toBe(1);
  });
});
