import { createIdempotency } from '@once/http';
import { expressIdempotency } from '@once/http/express';
import { fastifyIdempotency } from '@once/http/fastify';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';

// Options of the two bindings, checked at registration (no database: the pool is never used).
const pool = { query: async () => ({ rows: [] }), connect: async () => ({}) } as never;
const idempotency = createIdempotency({ pool, logger: false });

describe('expressIdempotency options', () => {
  it('requires the scope function and names the field', () => {
    expect(() => expressIdempotency({ idempotency } as never)).toThrow(/options\.scope is required/);
  });
  it('requires the engine', () => {
    expect(() => expressIdempotency({ scope: () => 'a' } as never)).toThrow(/options\.idempotency/);
  });
  it('refuses a bad bodyLimitBytes', () => {
    expect(() => expressIdempotency({ idempotency, scope: () => 'a', bodyLimitBytes: -1 })).toThrow(
      /bodyLimitBytes/,
    );
  });
});

describe('fastifyIdempotency options', () => {
  it('requires the scope function and names the field', async () => {
    const app = Fastify();
    await expect(app.register(fastifyIdempotency, { idempotency } as never).ready()).rejects.toThrow(
      /options\.scope is required/,
    );
    await app.close();
  });
  it('requires the engine', async () => {
    const app = Fastify();
    await expect(app.register(fastifyIdempotency, { scope: () => 'a' } as never).ready()).rejects.toThrow(
      /options\.idempotency/,
    );
    await app.close();
  });
});
