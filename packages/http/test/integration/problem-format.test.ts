import { stripeProblemFormat } from '@once/http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BINDING_NAMES, type BindingApp, startBinding } from '../support/in-process.js';

// formatProblem on every binding (issue #26, item 8): the answers once writes itself (400, 409,
// 422, 500) get the format's body and media type, and keep their status and Retry-After; the
// handler's own answers are left as they are; a format that throws leaves problem+json.

type StripeBody = { error: { type: string; code: string; message: string } };

describe.each(BINDING_NAMES)('%s binding with formatProblem', (name) => {
  let app: BindingApp;
  let broken: BindingApp;
  beforeAll(async () => {
    app = await startBinding(name, { formatProblem: stripeProblemFormat, lockTimeoutMs: 200 });
    broken = await startBinding(name, {
      formatProblem: () => {
        throw new Error('a broken format');
      },
    });
  });
  afterAll(async () => {
    await app?.close();
    await broken?.close();
  });

  let n = 0;
  const newKey = () => `fmt-${name}-${++n}-${Math.random().toString(36).slice(2)}`;
  const stripeShaped = async (res: Response, status: number, type: string, code: string) => {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as StripeBody;
    expect(body.error).toMatchObject({ type, code });
    expect(body.error.message.length).toBeGreaterThan(0);
  };

  it('formats 400, 422, 409 (keeping Retry-After) and the 500 of a failed COMMIT', async () => {
    await stripeShaped(await app.post('/charges', 'a, b'), 400, 'invalid_request_error', 'key-invalid');
    await stripeShaped(await app.post('/charges', undefined), 400, 'invalid_request_error', 'key-missing');
    const key = newKey();
    const first = await app.post('/charges', key, { body: { amount: 1 } });
    expect(first.status).toBe(201);
    expect(first.headers.get('content-type')).toMatch(/^application\/json/);
    await stripeShaped(
      await app.post('/charges', key, { body: { amount: 2 } }),
      422,
      'idempotency_error',
      'key-mismatch',
    );
    const slow = newKey();
    const holding = app.post('/charges', slow, { headers: { 'x-hold-ms': '1500' } });
    await new Promise((r) => setTimeout(r, 300));
    const busy = await app.post('/charges', slow);
    if (busy.status === 409) {
      expect(Number(busy.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      await stripeShaped(busy, 409, 'idempotency_error', 'key-in-flight');
    } else {
      // on a loaded machine the first may have committed already: then this is its replay
      expect(busy.headers.get('idempotent-replayed')).toBe('true');
    }
    expect((await holding).status).toBe(201);
    await stripeShaped(
      await app.post('/charges', newKey(), { headers: { 'x-deferred': '1' } }),
      500,
      'api_error',
      'handler-failed',
    );
  });

  it("leaves the handler's own answers as they are", async () => {
    const res = await app.post('/charges', newKey(), { headers: { 'x-status': '402' } });
    expect(res.status).toBe(402);
    expect(((await res.json()) as { amount: number }).amount).toBe(100);
  });

  it('answers problem+json when the format throws', async () => {
    const res = await broken.post('/charges', 'a, b');
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(((await res.json()) as { type: string }).type).toMatch(/#key-invalid$/);
  });
});
