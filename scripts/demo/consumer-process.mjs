// @ts-check
// One consumer child of the demo: started with `node <script> ...args`, it prints one JSON line of
// outcome counts every ~50 ms and on exit. This keeps the last line seen, so the runner can sum
// what each process reported. A SIGKILLed process cannot report its final milliseconds, so its
// counts are a floor.
import { spawn } from 'node:child_process';

/** @typedef {import('./example-contract.js').DemoConsumerSpec} DemoConsumerSpec */

export class ConsumerProcess {
  /** @type {Record<string, number>} */
  counts = {};
  /** @type {number | null} exit code; null while running or when ended by a signal */
  code = null;
  /** @type {NodeJS.Signals | null} */
  signal = null;
  exited = false;
  /** @type {import('node:child_process').ChildProcess} */
  #child;
  /** @type {Promise<void>} */
  #closed;

  /**
   * @param {DemoConsumerSpec} spec
   * @param {string} label prefixes any non-JSON line the child prints
   */
  constructor(spec, label) {
    this.#child = spawn(process.execPath, [spec.script, ...spec.args], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...spec.env },
    });
    this.#closed = new Promise((resolve) =>
      this.#child.once('close', (code, signal) => {
        this.exited = true;
        this.code = code;
        this.signal = signal;
        resolve();
      }),
    );
    let buffered = '';
    this.#child.stdout?.on('data', (chunk) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) this.#read(line, label);
    });
  }

  /**
   * @param {string} line
   * @param {string} label
   */
  #read(line, label) {
    if (!line.trim()) return;
    try {
      const parsed = JSON.parse(line);
      if (parsed && typeof parsed === 'object') {
        this.counts = parsed;
        return;
      }
    } catch {}
    process.stderr.write(`[${label}] ${line}\n`);
  }

  /** Ends the process with SIGKILL: no graceful stop, no final report. */
  async kill() {
    if (!this.exited) this.#child.kill('SIGKILL');
    await this.#closed;
  }

  /**
   * Asks for a graceful stop; SIGKILLs after `graceMs` if it has not exited by then.
   * @param {number} graceMs
   * @returns {Promise<boolean>} whether it stopped on its own
   */
  async stop(graceMs) {
    if (this.exited) return this.code === 0;
    this.#child.kill('SIGTERM');
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    const late = new Promise((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([this.#closed, late]);
    clearTimeout(timer);
    if (this.exited) return this.code === 0;
    await this.kill();
    return false;
  }
}
