import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type Child,
  freshDb,
  killAllChildren,
  startChild,
  type TestDb,
} from '../../../../test/support/index.js';
import { queues, sendAll, sleep, sqsClient, unique, waitFor } from './fixtures/env.js';

const CHILD = fileURLToPath(new URL('./fixtures/consumer-child.mjs', import.meta.url));
const client = sqsClient();
const q = queues(client);
const run = unique('sqs-chaos');
let db: TestDb;

beforeAll(async () => {
  db = await freshDb('sqs_chaos', 12);
});
afterAll(async () => {
  await killAllChildren();
  await q.drop();
  await db.close();
  client.destroy();
});

// The size is 5,000 messages over 20 groups (ONCE_SCALE=1); the default run is a fifth.
const SCALE = Number(process.env.ONCE_SCALE ?? 0.2);
const N = Math.round(5_000 * SCALE);
const GROUPS = 20;
const KILLS = Math.max(4, Math.round(10 * SCALE));

/**
 * Runs the child and SIGKILLs it KILLS times, each time at a random moment while it is making
 * progress (after a random number of new effects, plus a random delay), so kills land between
 * effects and deletes rather than in idle polls; then lets the last run finish.
 */
async function killRandomly(child: Child, count: () => Promise<number>): Promise<number> {
  let kills = 0;
  while (kills < KILLS && (await count()) < N) {
    const before = await count();
    const step = 5 + Math.floor(Math.random() * Math.max(5, N / (2 * KILLS)));
    await waitFor(
      async () => (await count()) >= Math.min(N, before + step),
      60_000,
      'progress before a kill',
    );
    if ((await count()) >= N) break;
    await child.killAfterRandom(0, 300);
    kills++;
    child.start();
  }
  return kills;
}

async function fill(prefix: string): Promise<{ url: string; ids: string[] }> {
  const url = await q.create(`${prefix}.fifo`, { VisibilityTimeout: '2' });
  const ids = Array.from({ length: N }, (_, i) => `${prefix}-${i}`);
  await sendAll(
    client,
    url,
    ids.map((id, i) => ({ id, body: JSON.stringify({ n: i }), group: `g${i % GROUPS}`, dedup: id })),
  );
  return { url, ids };
}

const env = (mode: string, queueUrl: string, batch = false) => ({
  SQS_CHILD: JSON.stringify({
    mode,
    queueUrl,
    schema: db.schema,
    consumer: `chaos-${batch}`,
    batch,
    // Every kill counts up every message in flight; a budget this size keeps innocent neighbours
    // from being taken for a process-killing message (see AttemptsExhaustedError).
    maxAttempts: 50,
    visibilityTimeoutS: 2,
    handlerDelayMs: 4,
  }),
});

it.each([false, true])(
  `SIGKILL at random moments over ${N} messages in ${GROUPS} groups, restarted, batch=%s: exactly once, group order in commit order`,
  async (batch) => {
    const { url, ids } = await fill(`${run}-once-${batch}`);
    const child = startChild({ script: CHILD, env: env('once', url, batch) });
    const prefix = `${run}-once-${batch}-`;
    const kills = await killRandomly(child, async () => (await db.counts(prefix)).size);
    await waitFor(async () => (await db.counts(prefix)).size === N, 120_000, 'all ids');
    await waitFor(async () => (await q.depth(url)) === 0, 30_000, 'queue drained');
    await child.kill();
    const check = await db.check(ids, true);
    console.log(
      `[sqs chaos batch=${batch}] ${N} msgs, ${kills} SIGKILLs: lost ${check.lost.length}, duplicated ${check.duplicated.length}, order violations ${check.orderViolations.length}`,
    );
    expect(kills).toBeGreaterThanOrEqual(2);
    expect(check).toMatchObject({ ok: true, total: N });
  },
);

it('control: the naive consumer under the same kills repeats effects', async () => {
  const { url, ids } = await fill(`${run}-naive`);
  const child = startChild({ script: CHILD, env: env('naive', url) });
  const prefix = `${run}-naive-`;
  await killRandomly(child, async () => (await db.counts(prefix)).size);
  await waitFor(async () => (await db.counts(prefix)).size === N, 120_000, 'naive ids');
  await sleep(500);
  await child.kill();
  const check = await db.check(ids);
  console.log(`[sqs chaos naive] duplicated ${check.duplicated.length} of ${N}`);
  expect(check.duplicated.length).toBeGreaterThan(0);
});
