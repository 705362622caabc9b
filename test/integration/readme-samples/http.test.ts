import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  createTestPool,
  dropSchema,
  freshSchemaName,
  quoteIdent,
  serviceEnv,
  startChild,
  waitFor,
} from '../../support/index.js';
import { readSample, root, writeProgram } from './harness.js';

// packages/http/README.md's server, run as a program exactly as written (plain JavaScript, as a
// .mjs file), on a free loopback port (the sample reads PORT). A request whose body is not JSON is
// the client's mistake: the sample answers 400, stored under the key, so the same request again
// gets the same 400 back as a replay, where a thrown error would be a 500 that asks for a retry
// no retry can mend. A JSON body is charged once, and its retry replays the 201.
const CONSUMER = 'payments.http'; // as written

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as { port: number };
  await new Promise((ok) => server.close(ok));
  return port;
}

describe('README samples, HTTP', () => {
  it('packages/http/README.md http-readme: 400 for a body that is not JSON, replayed; 201 once for a charge', async () => {
    const admin = createTestPool();
    const schema = freshSchemaName('readme_http');
    const code = readSample('packages/http/README.md', 'http-readme');
    const script = writeProgram(`http-readme-${schema}`, code);
    const port = await freePort();
    const url = new URL(serviceEnv('DATABASE_URL'));
    url.searchParams.set('options', `-c search_path=${schema}`);
    let child: ReturnType<typeof startChild> | undefined;
    try {
      await admin.query(`CREATE SCHEMA ${quoteIdent(schema)}`);
      await admin
        .query('DELETE FROM once.inbox WHERE consumer = $1', [CONSUMER])
        .catch((err) => ((err as { code?: string }).code === '42P01' ? undefined : Promise.reject(err)));
      child = startChild({ script, env: { DATABASE_URL: url.toString(), PORT: String(port) }, cwd: root });
      const post = (key: string, body: string) =>
        fetch(`http://127.0.0.1:${port}/charges`, {
          method: 'POST',
          headers: {
            'idempotency-key': `"${key}"`,
            authorization: 'Bearer acct-1',
            'content-type': 'application/json',
          },
          body,
        });
      await waitFor('the server to listen', async () => {
        if (!child?.running) throw new Error(`the program exited: ${child?.stderr}`);
        return post(`probe-${schema}`, '{"amount":1}').then(
          () => true,
          () => false,
        );
      });

      const bad = await post(`bad-${schema}`, '{"amount": 1');
      expect(bad.status, await bad.clone().text()).toBe(400);
      const again = await post(`bad-${schema}`, '{"amount": 1');
      expect(again.status).toBe(400);
      expect(again.headers.get('idempotent-replayed')).toBe('true');

      const first = await post(`ok-${schema}`, '{"amount":250}');
      expect(first.status).toBe(201);
      const charged = (await first.json()) as { id: string; amount: number };
      const replay = await post(`ok-${schema}`, '{"amount":250}');
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await replay.json()).toEqual(charged);
      const { rows } = await admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM ${quoteIdent(schema)}.card_charges WHERE amount = 250`,
      );
      expect(Number(rows[0]!.n)).toBe(1);
    } finally {
      child?.process?.kill('SIGTERM');
      await child?.waitForExit(10_000).catch(() => {});
      await admin.query('DELETE FROM once.inbox WHERE consumer = $1', [CONSUMER]).catch(() => {});
      await dropSchema(admin, schema).catch(() => {});
      await admin.end();
    }
  });
});
