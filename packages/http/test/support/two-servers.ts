import { fileURLToPath } from 'node:url';
import { Child } from '../../../../test/support/index.js';

// Shared by the bindings' crash tests: two server processes of one binding (server.mjs with
// bindings/<name>.mjs) on one database, SIGKILLed at random points and restarted on their port
// while clients send requests and retry each one with its key until they get a final answer.
// A binding joins by adding bindings/<name>.mjs with a `listen` like bindings/fetch.mjs.

const SERVER = fileURLToPath(new URL('./server.mjs', import.meta.url));

/** One server process; restarts on the port it first bound. */
export class TestServer {
  readonly child: Child;
  readonly #env: Record<string, string>;
  port = 0;

  constructor(binding: string, env: Record<string, string>) {
    this.#env = { ...env, HTTP_PORT: '0' };
    this.child = new Child({ script: SERVER, args: [binding], env: this.#env });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts the process and waits until it listens. */
  async start(): Promise<this> {
    const run = this.child.runs;
    this.child.start();
    const line = await this.child.waitForLine(
      (l) => l.run === run && (l.json as { event?: string } | undefined)?.event === 'listening',
      60_000, // a hang guard: a start on a loaded machine can take seconds
    );
    this.port = (line.json as { port: number }).port;
    this.#env.HTTP_PORT = String(this.port); // restarts come back on the same port
    return this;
  }

  /** SIGKILL: no cleanup, no response to requests in flight. */
  async kill(): Promise<void> {
    await this.child.kill('SIGKILL');
  }

  #starting: Promise<unknown> | undefined;

  /**
   * Starts the process again if it is down (killed, or it killed itself); one start at a time.
   * A start cut short by a kill is tried again.
   */
  async ensureUp(): Promise<void> {
    while (!this.child.running || this.#starting) {
      if (!this.#starting) {
        this.#starting = this.start().then(
          () => undefined,
          () => undefined, // killed while starting: the loop tries again
        );
        void this.#starting.finally(() => {
          this.#starting = undefined;
        });
      }
      await this.#starting;
      await sleep(0);
    }
  }
}

/** Starts two servers of `binding` on `schema`. */
export async function startTwoServers(
  binding: string,
  env: Record<string, string>,
): Promise<[TestServer, TestServer]> {
  const a = new TestServer(binding, env);
  const b = new TestServer(binding, env);
  await Promise.all([a.start(), b.start()]);
  return [a, b];
}

/** What a client finally got for its key. */
export interface FinalAnswer {
  readonly key: string;
  readonly status: number;
  readonly json: { charge?: string; key?: string | null };
  readonly replayed: boolean;
  /** How many requests it took (1 when the first one was answered). */
  readonly tries: number;
}

/** Options of {@link runCrashCampaign}. */
export interface CrashCampaignOptions {
  readonly servers: readonly TestServer[];
  /** The route's path: `/charges` (idempotent) or `/naive` (the control). */
  readonly path: string;
  /** The keys to send, each by its own client (`concurrency` at a time). */
  readonly keys: readonly string[];
  readonly concurrency: number;
  /** SIGKILLs during the run (each followed by a restart). */
  readonly kills: number;
  /** Delay range between kills, ms. */
  readonly killEveryMs: readonly [number, number];
  /** Extra headers for each request (e.g. `{ 'x-hold-ms': '30' }` to widen the windows). */
  readonly headers?: Record<string, string>;
  /**
   * Which requests ask the server to SIGKILL itself right after a first success, before the
   * response leaves (`x-die-after-commit`), by the key's index and the try (1-based). On an
   * idempotent route the client then ends with the replay; the naive route dies after its first
   * effect for the key only, so the retry runs the effect again and answers. @default none
   */
  readonly dieAfterCommit?: (index: number, tries: number) => boolean;
  /** More headers for one try of one key (e.g. `x-swallow` on the first try only). @default none */
  readonly headersFor?: (index: number, tries: number) => Record<string, string>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

/** SIGKILLs a server picked at random and starts it again, `count` times, spaced by `everyMs`. */
function startKiller(
  servers: readonly TestServer[],
  count: number,
  everyMs: readonly [number, number],
): { done: Promise<void>; kills: () => number } {
  let kills = 0;
  const done = (async () => {
    while (kills < count) {
      await sleep(everyMs[0] + Math.random() * (everyMs[1] - everyMs[0]));
      const server = pick(servers);
      await server.ensureUp(); // kill a server that is serving, not one still starting
      await server.kill();
      kills++;
      await server.ensureUp();
    }
  })();
  return { done, kills: () => kills };
}

/** What one request without a key got: no answer (its server died), or a status and body. */
export interface UnkeyedAnswer {
  readonly id: string;
  readonly status: number | 'no answer';
  readonly json?: { charge?: string; request?: string | null };
}

/**
 * Sends `ids.length` requests without a key to `path`, each once (a request without a key is
 * not retried: a retry would be another request), `x-request-id` naming each, while a killer
 * SIGKILLs and restarts the servers; resolves with every request's answer.
 */
export async function runUnkeyedCampaign(o: {
  readonly servers: readonly TestServer[];
  readonly path: string;
  readonly ids: readonly string[];
  readonly concurrency: number;
  readonly kills: number;
  readonly killEveryMs: readonly [number, number];
  readonly headers?: Record<string, string>;
}): Promise<{ answers: UnkeyedAnswer[]; kills: number }> {
  const killer = startKiller(o.servers, o.kills, o.killEveryMs);
  const answers: UnkeyedAnswer[] = [];
  const queue = [...o.ids];
  const client = async () => {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      await pick(o.servers).ensureUp();
      try {
        const res = await fetch(`${pick(o.servers).url}${o.path}`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-principal': 'unkeyed',
            'x-request-id': id,
            ...o.headers,
          },
          body: JSON.stringify({ amount: 100 }),
          signal: AbortSignal.timeout(10_000),
        });
        const text = await res.text();
        let json: UnkeyedAnswer['json'];
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        answers.push({ id, status: res.status, ...(json === undefined ? {} : { json }) });
      } catch {
        answers.push({ id, status: 'no answer' });
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, client));
  await killer.done;
  await Promise.all(o.servers.map((s) => s.ensureUp()));
  return { answers, kills: killer.kills() };
}

/**
 * Sends one request per key through retrying clients while a killer SIGKILLs and restarts the
 * servers; resolves with every key's final answer once all keys have one (a 2xx) and the killer
 * is done. A client retries with the same key after a connection error, a 409 or a 5xx, on
 * either server, as docs/http.md tells clients to.
 */
export async function runCrashCampaign(
  o: CrashCampaignOptions,
): Promise<{ answers: FinalAnswer[]; kills: number }> {
  let running = true;
  // Brings back servers that died by themselves (x-die-after-commit) as well as killed ones.
  const supervisor = (async () => {
    while (running) {
      await Promise.all(o.servers.map((s) => s.ensureUp()));
      await sleep(25);
    }
  })();
  const killer = startKiller(o.servers, o.kills, o.killEveryMs);
  const answers: FinalAnswer[] = [];
  const queue = o.keys.map((key, index) => ({ key, index }));
  const client = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      answers.push(await untilAnswered(o, next.key, next.index));
    }
  };
  try {
    await Promise.all(Array.from({ length: o.concurrency }, client));
    await killer.done;
  } finally {
    running = false;
    await supervisor;
  }
  await Promise.all(o.servers.map((s) => s.ensureUp()));
  return { answers, kills: killer.kills() };
}

async function untilAnswered(o: CrashCampaignOptions, key: string, index: number): Promise<FinalAnswer> {
  const principal = `p${key.length % 3}`;
  const started = Date.now();
  for (let tries = 1; ; tries++) {
    const server = pick(o.servers);
    try {
      const res = await fetch(`${server.url}${o.path}`, {
        method: 'POST',
        headers: {
          'idempotency-key': key,
          'x-principal': principal,
          'content-type': 'application/json',
          ...o.headers,
          ...(o.dieAfterCommit?.(index, tries) ? { 'x-die-after-commit': '1' } : {}),
          ...o.headersFor?.(index, tries),
        },
        body: JSON.stringify({ amount: 100 }),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await res.text();
      if (res.status >= 200 && res.status < 300) {
        return {
          key,
          status: res.status,
          json: JSON.parse(text),
          replayed: res.headers.get('idempotent-replayed') === 'true',
          tries,
        };
      }
      if (res.status !== 409 && res.status < 500)
        throw new Error(`key ${key}: unexpected ${res.status} ${text}`);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith(`key ${key}: unexpected`)) throw err;
      // connection refused or reset: the server was killed; retry with the same key
    }
    // a hang guard, not a timing: a healthy run answers every key within seconds
    if (Date.now() - started > 120_000) throw new Error(`key ${key}: no answer after ${tries} tries`);
    await sleep(20 + Math.random() * 80);
  }
}
