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
    expect(() => expressIdempotency({ idempotency } as never)).toThrow(/option 'scope' is required/);
  });
  it('requires the engine', () => {
    expect(() => expressIdempotency({ scope: () => 'a' } as never)).toThrow(/option 'idempotency'/);
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
      /option 'scope' is required/,
    );
    await app.close();
  });
  it('requires the engine', async () => {
    const app = Fastify();
    await expect(app.register(fastifyIdempotency, { scope: () => 'a' } as never).ready()).rejects.toThrow(
      /option 'idempotency'/,
    );
    await app.close();
  });
});

describe('request.idempotent outside an idempotent route', () => {
  /** An app whose routes answer with what reading request.idempotent threw. */
  async function app(pluginFirst: boolean) {
    const a = Fastify();
    const register = () => a.register(fastifyIdempotency, { idempotency, scope: () => 'tenant' });
    const answer = async (request: { idempotent: unknown }) => {
      try {
        void request.idempotent;
        return { error: null };
      } catch (err) {
        return { error: (err as Error).message };
      }
    };
    if (pluginFirst) await register();
    a.post('/marked', { config: { idempotent: true } }, answer as never);
    a.post('/plain', answer as never);
    if (!pluginFirst) await register();
    await a.ready();
    return a;
  }
  const errorOf = async (a: Awaited<ReturnType<typeof app>>, url: string) =>
    (await a.inject({ method: 'POST', url, payload: {} })).json<{ error: string | null }>().error;

  it('a route marked idempotent, declared before the plugin: says to register the plugin first', async () => {
    const a = await app(false);
    try {
      const error = await errorOf(a, '/marked');
      expect(error).toContain('register the plugin before the routes');
      expect(error).toContain('POST /marked');
      expect(error).not.toContain('add `config: { idempotent: true }`');
    } finally {
      await a.close();
    }
  });

  it('a route not marked: says to mark it', async () => {
    const a = await app(true);
    try {
      expect(await errorOf(a, '/plain')).toContain('add `config: { idempotent: true }` to POST /plain');
    } finally {
      await a.close();
    }
  });
});
