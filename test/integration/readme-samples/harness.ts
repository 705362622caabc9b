/**
 * Runs a README's first sample as the program a reader would paste: the block after its
 * `<!-- sample: NAME ... -->` marker, taken from the Markdown file and written as it is to a
 * `.mjs` file under .cache/ (where node resolves `@once/*` to the workspace packages' built dist/,
 * as an installed package would), started as a child process. Nothing is transpiled: a sample
 * that is not plain JavaScript fails here as it would for a reader. Its names (topic, group,
 * queue, table) are the ones written in it, so the broker side clears what an earlier run left
 * under them; addresses come from the environment variables the sample reads (`KAFKA_BROKERS`,
 * `NATS_URL`, `AMQP_URL`, `DATABASE_URL`). The only changes a broker side may ask for are
 * replacements of what cannot exist here (SQS's AWS queue URLs), each of which must match, and
 * the `message-id` variant deletes the `idOf:` line, as the sample's comment tells a reader to.
 *
 * The scenario, the same for every broker: a plain producer (no once publisher) sends messages
 * and re-sends of some of them; the program must write each effect once, survive PostgreSQL
 * terminating its idle pool connections (its `pool.on('error')` keeps it alive) and keep
 * processing, then exit 0 on SIGTERM on its own, with nothing left holding the event loop.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import {
  type Child,
  createTestPool,
  dropSchema,
  freshSchemaName,
  quoteIdent,
  serviceEnv,
  startChild,
  uniqueName,
  waitFor,
} from '../../support/index.js';
import { extractSamples } from '../../unit/doc-samples.js';

export const root = fileURLToPath(new URL('../../../', import.meta.url));

/** The TypeScript block right after `<!-- sample: name ... -->` in `readme` (relative to the root). */
export function readSample(readme: string, name: string): string {
  const md = readFileSync(`${root}${readme}`, 'utf8');
  const lines = md.split('\n');
  const at = lines.findIndex((l) => new RegExp(`^<!-- sample: ${name}\\b.*-->\\s*$`).test(l));
  if (at < 0) throw new Error(`${readme}: no <!-- sample: ${name} --> marker`);
  // The marker's next line opens the block; extractSamples numbers a block by its first code line.
  const sample = extractSamples(readme, md).find((s) => s.line === at + 3);
  if (!sample)
    throw new Error(`${readme}: the marker <!-- sample: ${name} --> is not followed by a ts block`);
  return sample.code;
}

/** How the test changes the sample: string replacements, and whether the `idOf:` line is deleted. */
export interface Rewrite {
  /** `[as written, replacement]`; each must occur in the sample. */
  readonly replace: readonly (readonly [string, string])[];
  /** Delete the sample's one `idOf:` line, as its comment says to for a producer that sets the id. */
  readonly dropIdOf: boolean;
}

/** Applies `rewrite` to `code`; throws naming a replacement that no longer matches. */
export function rewriteSample(code: string, rewrite: Rewrite): string {
  let out = code;
  for (const [from, to] of rewrite.replace) {
    if (!out.includes(from)) throw new Error(`the sample no longer contains ${JSON.stringify(from)}`);
    out = out.split(from).join(to);
  }
  if (rewrite.dropIdOf) {
    const idOf = /^\s*idOf: .*\n/gm;
    const found = out.match(idOf) ?? [];
    if (found.length !== 1) throw new Error(`expected one idOf line in the sample, found ${found.length}`);
    out = out.replace(idOf, '');
  }
  return out;
}

/** Writes the sample, as it is, to `.cache/readme-samples/<file>.mjs` and returns that path. */
export function writeProgram(file: string, code: string): string {
  const dir = `${root}.cache/readme-samples`;
  mkdirSync(dir, { recursive: true });
  const path = `${dir}/${file}.mjs`;
  writeFileSync(path, code);
  return path;
}

/** One message the plain producer sends: the id, and the JSON body the sample's handler reads. */
export interface Sent {
  readonly id: string;
  readonly body: string;
}

/** What a broker contributes to {@link runSample}. */
export interface BrokerSide {
  /** Replacements of what cannot exist here (SQS's AWS URLs); empty: the sample runs as written. */
  readonly replace: readonly (readonly [string, string])[];
  /** Clears what an earlier run left under the sample's names and creates what its comments say to. */
  prepare?(): Promise<void>;
  /** Environment for the program: the service addresses the sample reads. */
  readonly env?: Readonly<Record<string, string>>;
  /** Sends with a plain producer; `withIdHeader` sets the broker's `message-id` header. */
  send(messages: readonly Sent[], withIdHeader: boolean): Promise<void>;
  /** Resolves once the program is consuming (for brokers that drop messages sent before that). */
  consuming?(): Promise<void>;
  /** Resolves once the broker holds nothing unsettled for the program: all consumed and settled. */
  drained(): Promise<void>;
  /** Asserts after the program's exit that nothing was dead-lettered and nothing is left. */
  checkAfterExit(): Promise<void>;
  cleanup(): Promise<void>;
}

/** One sample run: where it is, its table and name as written, and how its bodies look. */
export interface SampleSpec {
  readonly readme: string;
  readonly marker: string;
  /** The table the sample creates, as written in it. */
  readonly table: string;
  /** The name effects are recorded under in the inbox, after the broker's replacements. */
  readonly consumer: string;
  /** The body for a message id, as the sample's handler parses it. */
  readonly bodyOf: (id: string, n: number) => string;
  readonly variant: 'header' | 'idOf';
  readonly broker: BrokerSide;
}

/** Waits for `check`; fails at once, with its stderr, if the program exits meanwhile. */
async function until(
  child: Child,
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 90_000,
): Promise<void> {
  try {
    await waitFor(
      what,
      async () => {
        if (!child.running) throw new Error(`the program exited waiting for ${what}`);
        return check();
      },
      timeoutMs,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; stderr:\n${child.stderr.slice(-3000)}`);
  }
}

/** What {@link runSample} measured (and printed). */
export interface SampleResult {
  readonly exitMs: number;
  readonly terminated: number;
}

export async function runSample(spec: SampleSpec): Promise<SampleResult> {
  const admin = createTestPool();
  const schema = freshSchemaName('readme');
  const app = uniqueName('readme').replace(/-/g, '_');
  const table = `${quoteIdent(schema)}.${quoteIdent(spec.table)}`;
  const inboxRows = async (status: string) =>
    Number(
      (
        await admin.query<{ n: string }>(
          'SELECT count(*) AS n FROM once.inbox WHERE consumer = $1 AND status = $2',
          [spec.consumer, status],
        )
      ).rows[0]!.n,
    );
  const effects = async () => {
    try {
      return Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);
    } catch (err) {
      if ((err as { code?: string }).code === '42P01') return 0; // the program has not created it yet
      throw err;
    }
  };
  let script: string | undefined;
  try {
    await admin.query(`CREATE SCHEMA ${quoteIdent(schema)}`);
    // Only the connection string differs from what a reader runs: the sample's table lands in this
    // test's schema (search_path), and the program's connections carry a name to find them by.
    const url = new URL(serviceEnv('DATABASE_URL'));
    url.searchParams.set('application_name', app);
    url.searchParams.set('options', `-c search_path=${schema}`);
    const asWritten = readSample(spec.readme, spec.marker);
    const code = rewriteSample(asWritten, {
      replace: spec.broker.replace,
      dropIdOf: spec.variant === 'header',
    });
    if (spec.variant === 'idOf' && spec.broker.replace.length === 0)
      expect(code, 'the program is the sample as written').toBe(asWritten);
    // What an earlier run recorded under the sample's consumer name (none before the first migrate).
    await admin.query('DELETE FROM once.inbox WHERE consumer = $1', [spec.consumer]).catch((err) => {
      if ((err as { code?: string }).code !== '42P01') throw err;
    });
    await spec.broker.prepare?.();
    script = writeProgram(`${spec.marker}-${spec.variant}-${app}`, code);
    const withHeader = spec.variant === 'header';
    const ids = Array.from({ length: 30 }, (_, i) => `${app}-${i}`);
    const sent = (i: number): Sent => ({ id: ids[i]!, body: spec.bodyOf(ids[i]!, i + 1) });
    // The first 20, then re-sends of five of them (a producer retrying): 20 effects.
    const first = [...ids.slice(0, 20).map((_, i) => sent(i)), ...[0, 3, 7, 11, 19].map(sent)];
    const second = [
      ...[20, 21, 22, 23, 24].map(sent),
      ...[2, 21].map(sent),
      ...[25, 26, 27, 28, 29].map(sent),
    ];

    // Kafka and SQS keep what was sent before the consumer started (the first-run case).
    if (!spec.broker.consuming) await spec.broker.send(first, withHeader);
    const child = startChild({
      script,
      env: { DATABASE_URL: url.toString(), ...spec.broker.env },
      cwd: root,
    });
    if (spec.broker.consuming) {
      await spec.broker.consuming();
      await spec.broker.send(first, withHeader);
    }
    await until(child, 'the first 20 effects', async () => (await effects()) >= 20);
    await spec.broker.drained();

    // PostgreSQL ends the pool's idle connections (as a restart or an idle timeout would).
    const { rows } = await admin.query<{ n: string }>(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n
         FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle'`,
      [app],
    );
    const terminated = Number(rows[0]!.n);
    expect(terminated, 'idle pool connections terminated').toBeGreaterThan(0);
    await until(
      child,
      'the pool error listener to report it',
      async () => child.stderr.includes('pg pool:'),
      15_000,
    );
    expect(child.running, `the program died: ${child.stderr.slice(-2000)}`).toBe(true);

    await spec.broker.send(second, withHeader);
    await until(child, 'all 30 effects', async () => (await effects()) >= 30);
    await spec.broker.drained();

    const t0 = Date.now();
    child.process!.kill('SIGTERM');
    // The hang guard: an open handle (a timer, a socket, a pool) keeps the process alive.
    const exit = await child.waitForExit(30_000);
    const exitMs = Date.now() - t0;
    expect(exit, `exit after SIGTERM; stderr tail:\n${child.stderr.slice(-2000)}`).toEqual({
      code: 0,
      signal: null,
    });

    expect(await effects()).toBe(30);
    expect(await inboxRows('done')).toBe(30);
    expect(await inboxRows('failed')).toBe(0);
    expect(child.stderr, 'no dead-letter or conflict line').not.toMatch(/dead-letter|conflict/i);
    await spec.broker.checkAfterExit();
    console.log(
      `${spec.readme} ${spec.marker} (${spec.variant}): exited 0 ${exitMs} ms after SIGTERM; ${terminated} idle connections terminated`,
    );
    return { exitMs, terminated };
  } finally {
    await spec.broker.cleanup().catch(() => {});
    await admin.query('DELETE FROM once.inbox WHERE consumer = $1', [spec.consumer]).catch(() => {});
    await dropSchema(admin, schema).catch(() => {});
    if (script) rmSync(script, { force: true });
    await admin.end();
  }
}
