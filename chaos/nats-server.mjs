// The campaign's own nats-server with JetStream: a free loopback port and a store in .cache/chaos/,
// so the campaign may stop it for a minute without touching the shared one on 4222.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, rmSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { freePort } from './pg-cluster.mjs';

const BIN =
  process.env.NATS_SERVER_BIN ??
  (existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server');

/** Resolves once the port accepts a connection and greets with INFO, or rejects after `ms`. */
async function greets(port, ms) {
  const until = Date.now() + ms;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('data', (d) => {
        s.destroy();
        resolve(d.toString().startsWith('INFO '));
      });
      s.once('error', () => resolve(false));
      setTimeout(() => {
        s.destroy();
        resolve(false);
      }, 1_000).unref();
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nats-server on ${port} did not answer within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A private nats-server: `start()`, `stop()` (SIGTERM, its store kept), `destroy()`. */
export class NatsServer {
  #dir;
  #port;
  #child;

  constructor(dir, port) {
    this.#dir = dir;
    this.#port = port;
  }

  get url() {
    return `nats://127.0.0.1:${this.#port}`;
  }

  static async create(parent, name) {
    const dir = join(parent, name);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, 'store'), { recursive: true });
    const server = new NatsServer(dir, await freePort());
    await server.start();
    return server;
  }

  async start() {
    const log = openSync(join(this.#dir, 'nats.log'), 'a');
    this.#child = spawn(
      BIN,
      ['-a', '127.0.0.1', '-p', String(this.#port), '-js', '-sd', join(this.#dir, 'store')],
      {
        stdio: ['ignore', log, log],
      },
    );
    const exited = new Promise((_, reject) =>
      this.#child.once('exit', (c) => reject(new Error(`nats-server exited ${c}`))),
    );
    exited.catch(() => {});
    await Promise.race([greets(this.#port, 30_000), exited]);
  }

  /** SIGTERM and wait for the exit; JetStream's store stays for the next start. */
  async stop() {
    const child = this.#child;
    if (!child || child.exitCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const hard = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(hard);
  }

  /** SIGKILL, for exit handlers (nothing asynchronous runs there). */
  killSync() {
    if (this.#child && this.#child.exitCode === null) this.#child.kill('SIGKILL');
  }

  async destroy() {
    await this.stop();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
