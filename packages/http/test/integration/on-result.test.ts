import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BINDING_NAMES, type BindingApp, startBinding } from '../support/in-process.js';

// A binding's onResult hook that throws (issue #26, item 1: on the node listener it reached a
// response with no 'error' listener and ended the process) changes nothing: the answer is sent
// as it was, and the hook's error is logged. Vitest fails the run on an unhandled rejection.

describe.each(BINDING_NAMES)('%s binding with an onResult that throws', (name) => {
  let app: BindingApp;
  beforeAll(async () => {
    app = await startBinding(name);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('answers as if the hook had not thrown, first and replayed', async () => {
    const key = `onr-${name}-${Math.random().toString(36).slice(2)}`;
    const headers = { 'x-throw-in-on-result': '1' };
    const first = await app.post('/charges', key, { headers });
    expect(first.status).toBe(201);
    const again = await app.post('/charges', key, { headers });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(await first.text());
    expect((await app.post('/charges', 'a, b', { headers })).status).toBe(400);
    expect(await app.effects(key)).toBe(1);
  });
});
