// The campaign's own PostgreSQL: a throwaway cluster in .cache/chaos/, on a free loopback port,
// that the campaign may kill, restart and stop for a minute without touching the shared server.
import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
const asRoot = process.getuid?.() === 0;

/** The command line of a PostgreSQL binary, as the `postgres` OS user when we are root (initdb refuses root). */
const commandOf = (bin, args) =>
  asRoot ? ['runuser', ['-u', 'postgres', '--', join(BIN, bin), ...args]] : [join(BIN, bin), args];

async function pg(bin, args) {
  const [cmd, argv] = commandOf(bin, args);
  return run(cmd, argv, { timeout: 120_000 });
}

/** A free loopback port: bind 0, read it, release it. */
export async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** A private cluster: `start()`, `restart()` (immediate: a crash and WAL recovery), `stop()`, `destroy()`. */
export class PgCluster {
  #dir;
  #port;

  constructor(dir, port) {
    this.#dir = dir;
    this.#port = port;
  }

  get url() {
    return `postgres://postgres@127.0.0.1:${this.#port}/postgres`;
  }

  get port() {
    return this.#port;
  }

  /**
   * initdb into `parent/<name>` and start on a free port. `listen`: addresses to listen on besides
   * 127.0.0.1 (the root ends of the campaign's veths) and `trust`, the subnet they connect from.
   */
  static async create(parent, name, listen = { addresses: [], trust: undefined }) {
    const dir = join(parent, name);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    if (asRoot) {
      chmodSync(parent, 0o755);
      await run('chown', ['postgres:postgres', dir]);
    }
    await pg('initdb', [
      '-D',
      join(dir, 'data'),
      '-U',
      'postgres',
      '--auth=trust',
      '--no-sync',
      '-E',
      'UTF8',
    ]);
    const port = await freePort();
    writeFileSync(
      join(dir, 'data', 'postgresql.auto.conf'),
      [
        `port = ${port}`,
        `listen_addresses = '${['127.0.0.1', ...listen.addresses].join(',')}'`,
        `unix_socket_directories = ''`,
        'max_connections = 120',
        'shared_buffers = 32MB',
        // Durable commits, as in production: a restart must not lose what consumers acked.
        'fsync = on',
        'synchronous_commit = on',
        "log_min_messages = 'fatal'",
        '',
      ].join('\n'),
    );
    if (listen.trust)
      appendFileSync(join(dir, 'data', 'pg_hba.conf'), `host all all ${listen.trust} trust\n`);
    const cluster = new PgCluster(dir, port);
    await cluster.start();
    return cluster;
  }

  async start() {
    await pg('pg_ctl', [
      '-D',
      join(this.#dir, 'data'),
      '-l',
      join(this.#dir, 'log'),
      '-w',
      '-t',
      '60',
      'start',
    ]);
  }

  /** Stops the server; `immediate` is a crash (no checkpoint, recovery on start). */
  async stop(mode = 'fast') {
    await pg('pg_ctl', ['-D', join(this.#dir, 'data'), '-m', mode, '-w', '-t', '60', 'stop']);
  }

  /** A crash restart: every backend dies at once, the server replays its WAL and comes back. */
  async restart() {
    await this.stop('immediate');
    await this.start();
  }

  /** An immediate stop that blocks: for exit handlers, where nothing asynchronous runs any more. */
  stopSync() {
    const [cmd, argv] = commandOf('pg_ctl', [
      '-D',
      join(this.#dir, 'data'),
      '-m',
      'immediate',
      '-w',
      '-t',
      '20',
      'stop',
    ]);
    try {
      execFileSync(cmd, argv, { stdio: 'ignore', timeout: 30_000 });
    } catch {
      /* not running */
    }
  }

  async destroy() {
    await this.stop('immediate').catch(() => {});
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
