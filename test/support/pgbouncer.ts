import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serviceEnv } from './env.js';

/** A private PgBouncer in front of the test PostgreSQL, on its own loopback port. */
export interface PgBouncer {
  /** A connection string through PgBouncer to the same database and user as `DATABASE_URL`. */
  readonly url: string;
  readonly port: number;
  /** Stops the process (SIGTERM, then SIGKILL) and removes its directory. */
  stop(): Promise<void>;
}

/** Options for {@link startPgBouncer}. */
export interface PgBouncerOptions {
  /** PgBouncer's `pool_mode`. @default 'transaction' */
  readonly poolMode?: 'session' | 'transaction' | 'statement';
  /** Server connections per database/user pair (`default_pool_size`). @default 4 */
  readonly poolSize?: number;
}

const BINARY_HINT = "pgbouncer not found: install it with 'apt-get install -y pgbouncer'";

/** `$PGBOUNCER`, else Debian's /usr/sbin/pgbouncer (often not on a non-root PATH), else the PATH's. */
function pgbouncerBinary(): string {
  if (process.env.PGBOUNCER) return process.env.PGBOUNCER;
  return existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : 'pgbouncer';
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Starts the machine's `pgbouncer` (Debian's package) from a config of its own in a temporary
 * directory: loopback only, trust auth (as the test PostgreSQL), no Unix socket. It never touches
 * a system-wide PgBouncer. Running as root, it drops to `nobody` (PgBouncer refuses root).
 */
export async function startPgBouncer(options: PgBouncerOptions = {}): Promise<PgBouncer> {
  const target = new URL(serviceEnv('DATABASE_URL'));
  const user = decodeURIComponent(target.username || 'postgres');
  const db = target.pathname.slice(1) || 'postgres';
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'once-pgbouncer-'));
  chmodSync(dir, 0o755);
  const ini = join(dir, 'pgbouncer.ini');
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`, { mode: 0o644 });
  writeFileSync(
    ini,
    [
      '[databases]',
      `${db} = host=${target.hostname} port=${target.port || 5432} dbname=${db}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      `pool_mode = ${options.poolMode ?? 'transaction'}`,
      `default_pool_size = ${options.poolSize ?? 4}`,
      'max_client_conn = 200',
      'ignore_startup_parameters = extra_float_digits,options',
      'admin_users =',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  let child: ChildProcess;
  try {
    child = spawn(pgbouncerBinary(), [...(asRoot ? ['-u', 'nobody'] : []), ini], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch {
    throw new Error(BINARY_HINT);
  }
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const spawnError = new Promise<never>((_, reject) =>
    child.once('error', (err) =>
      reject((err as NodeJS.ErrnoException).code === 'ENOENT' ? new Error(BINARY_HINT) : err),
    ),
  );
  const ready = (async () => {
    const until = Date.now() + 15_000;
    while (!(await answers(port))) {
      if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${stderr}`);
      if (Date.now() > until) throw new Error(`pgbouncer did not listen on ${port}: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    await Promise.race([ready, spawnError]);
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = new URL(target.toString());
  url.port = String(port);
  url.hostname = '127.0.0.1';
  return {
    url: url.toString(),
    port,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
