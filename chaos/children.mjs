// Consumer child processes as the campaign sees them: started, killed, stopped, restarted, and
// what each one holds between claim and settle, from the lines it prints (consumer.mjs).
import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ROOT } from './support.mjs';

const SCRIPT = join(ROOT, 'chaos', 'consumer.mjs');

/** One named consumer slot; each `start()` is a new process (a run). */
export class ConsumerChild {
  /** id -> { unit, phase: 'claimed' | 'committed', at } for messages between claim and settle. */
  inflight = new Map();
  runs = 0;
  ready = false;
  /** Set once this run was killed: lines it printed before dying may still be read afterwards. */
  dead = false;
  /** Exits nobody asked for: { code, signal, stderrTail, at }. */
  incidents = [];
  #proc;
  #expectExit = false;
  #stderr = '';
  #exited = Promise.resolve();

  /**
   * `wrap`: a command prefix the child runs under (`ip netns exec <ns>`: it execs, so the pid
   * signalled is the consumer's own). `logFile`: where every run's stderr is appended.
   * @param {{ name: string, mode: 'once'|'naive', config: object, wrap?: string[], logFile?: string, onLine: Function, onUnexpectedExit: Function }} o
   */
  constructor(o) {
    this.name = o.name;
    this.mode = o.mode;
    this.o = o;
  }

  get running() {
    const p = this.#proc;
    return p !== undefined && p.exitCode === null && p.signalCode === null;
  }

  get pid() {
    return this.#proc?.pid;
  }

  start() {
    this.dead = false;
    this.runs++;
    this.ready = false;
    this.inflight.clear();
    this.#expectExit = false;
    this.#stderr = '';
    const [cmd, ...args] = [...(this.o.wrap ?? []), process.execPath, SCRIPT];
    const p = spawn(cmd, args, {
      env: {
        ...process.env,
        NODE_NO_WARNINGS: '1',
        CHAOS_CHILD: JSON.stringify({ ...this.o.config, mode: this.mode }),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.#proc = p;
    p.stdin.on('error', () => {});
    const logFile = this.o.logFile;
    if (logFile)
      appendFileSync(logFile, `--- run ${this.runs} (pid ${p.pid}) at ${new Date().toISOString()}\n`);
    p.stderr.on('data', (d) => {
      this.#stderr = (this.#stderr + d.toString()).slice(-4000);
      if (logFile) appendFileSync(logFile, d);
    });
    createInterface({ input: p.stdout }).on('line', (text) => {
      let msg;
      try {
        msg = JSON.parse(text);
      } catch {
        return;
      }
      if (msg.t === 'ready') this.ready = true;
      this.o.onLine(this, msg, Date.now());
    });
    this.#exited = new Promise((resolve) => {
      p.once('close', (code, signal) => {
        this.inflight.clear();
        this.ready = false;
        if (!this.#expectExit && p === this.#proc) {
          const incident = { code, signal, stderrTail: this.#stderr.slice(-1500), at: Date.now() };
          this.incidents.push(incident);
          this.o.onUnexpectedExit(this, incident);
        }
        resolve({ code, signal });
      });
    });
    return this;
  }

  send(line) {
    if (this.running) this.#proc.stdin.write(`${line}\n`);
  }

  signal(sig) {
    if (this.running) this.#proc.kill(sig);
  }

  /** SIGKILL (expected), resolves on exit. */
  async kill() {
    this.dead = true;
    this.#expectExit = true;
    this.signal('SIGKILL');
    return this.#exited;
  }

  /** Marks the next exit as expected (an armed self-kill) and resolves on it. */
  expectExit() {
    this.dead = true;
    this.#expectExit = true;
    return this.#exited;
  }

  /** SIGTERM: a graceful stop; SIGKILL after `graceMs`. */
  async stop(graceMs = 25_000) {
    this.#expectExit = true;
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    const t = setTimeout(() => this.signal('SIGKILL'), graceMs);
    const exit = await this.#exited;
    clearTimeout(t);
    return exit;
  }
}
