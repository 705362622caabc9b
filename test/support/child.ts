import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { onTestFinished } from 'vitest';

/** Options for {@link startChild}. */
export interface ChildOptions {
  /** The script node runs (a built `.js`: children use `dist/`, not TypeScript sources). */
  readonly script: string;
  /** Arguments after the script. @default [] */
  readonly args?: readonly string[];
  /** Variables added to the test's own environment (which carries the service urls). @default {} */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory. @default the test's */
  readonly cwd?: string;
}

/** How a child ended: an exit code, or the signal that killed it. */
export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** One line of the child's stdout; `json` is set when the line parses as JSON (the suggested protocol). */
export interface ChildLine {
  readonly text: string;
  readonly json: unknown;
  /** Which run of the child printed it: 0 for the first, +1 per {@link Child.restart}. */
  readonly run: number;
}

const live = new Set<Child>();
// A worker that exits (or crashes) must not leave consumers running against the shared brokers.
process.once('exit', () => {
  for (const c of live) c.process?.kill('SIGKILL');
});

/**
 * A node program under test, run as a child process so it can be SIGKILLed at an arbitrary
 * point (the crash windows the effectively-once guarantee must survive) and restarted.
 * stdout is read as lines; stderr is kept for the failure message.
 */
export class Child {
  readonly options: ChildOptions;
  /** Every stdout line of every run, in order. */
  readonly lines: ChildLine[] = [];
  /** stderr of every run, for diagnosis. */
  stderr = '';
  /** The current process, if one was started. */
  process: ChildProcess | undefined;
  #run = -1;
  #exited: Promise<ChildExit> = Promise.resolve({ code: null, signal: null });
  #waiters = new Set<() => void>();
  #closed = true; // the current run's stdout is fully read (set on 'close', which follows 'exit')

  constructor(options: ChildOptions) {
    this.options = options;
  }

  /** How many times the program has been started. */
  get runs(): number {
    return this.#run + 1;
  }

  /** True while the current process has not exited. */
  get running(): boolean {
    const p = this.process;
    return p !== undefined && p.exitCode === null && p.signalCode === null;
  }

  /** Starts the program (again, after it has exited). */
  start(): this {
    if (this.running) throw new Error(`child ${this.options.script} is already running`);
    const run = ++this.#run;
    const p = spawn(process.execPath, [this.options.script, ...(this.options.args ?? [])], {
      cwd: this.options.cwd,
      env: { ...process.env, ...this.options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.process = p;
    this.#closed = false;
    live.add(this);
    this.#exited = new Promise((resolve) => {
      p.once('close', (code, signal) => {
        live.delete(this);
        this.#closed = true;
        this.#notify();
        resolve({ code, signal });
      });
    });
    createInterface({ input: p.stdout! }).on('line', (text) => {
      this.lines.push({ text, json: parseJson(text), run });
      this.#notify();
    });
    p.stderr!.on('data', (d: Buffer) => {
      this.stderr += d.toString();
    });
    return this;
  }

  /**
   * Resolves with the first line (of any run, oldest first, including lines already read) for
   * which `match` is true; rejects on timeout or if the child exits first.
   */
  waitForLine(match: (line: ChildLine) => boolean, timeoutMs = 30_000): Promise<ChildLine> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.lines.find(match);
        if (found) return done(() => resolve(found));
        if (this.#closed) return done(() => reject(this.#error('exited before the awaited line')));
      };
      const timer = setTimeout(
        () => done(() => reject(this.#error(`no matching line in ${timeoutMs} ms`))),
        timeoutMs,
      );
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.#waiters.delete(check);
        settle();
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Sends `signal` (SIGKILL by default: no cleanup runs, as in a crash) and waits for the exit. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<ChildExit> {
    if (this.running) this.process!.kill(signal);
    return this.#exited;
  }

  /** SIGKILLs at a uniformly random moment in [minMs, maxMs]; resolves with the delay used and the exit. */
  async killAfterRandom(minMs: number, maxMs: number): Promise<ChildExit & { readonly afterMs: number }> {
    const afterMs = Math.round(minMs + Math.random() * (maxMs - minMs));
    await new Promise((r) => setTimeout(r, afterMs));
    return { ...(await this.kill('SIGKILL')), afterMs };
  }

  /** SIGKILLs the current process if it is still running, then starts a new one. */
  async restart(): Promise<this> {
    await this.kill('SIGKILL');
    return this.start();
  }

  /** Waits for the current process to exit on its own; rejects after `timeoutMs`. */
  async waitForExit(timeoutMs = 30_000): Promise<ChildExit> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(this.#error(`still running after ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      return await Promise.race([this.#exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  #notify(): void {
    for (const w of [...this.#waiters]) w();
  }

  #error(what: string): Error {
    const tail = this.stderr.split('\n').slice(-20).join('\n');
    return new Error(`child ${this.options.script} ${what}; stderr tail:\n${tail}`);
  }
}

/**
 * Starts a child. Inside a test it is SIGKILLed when the test finishes; started from a hook,
 * call {@link killAllChildren} in `afterAll`/`afterEach`. Every child dies with the worker anyway.
 */
export function startChild(options: ChildOptions): Child {
  const child = new Child(options).start();
  try {
    onTestFinished(async () => {
      await child.kill();
    });
  } catch {
    // Not inside a test (e.g. beforeAll): the caller owns cleanup.
  }
  return child;
}

/** SIGKILLs every child still running in this worker and waits for them to exit. */
export async function killAllChildren(): Promise<void> {
  await Promise.all([...live].map((c) => c.kill()));
}

function parseJson(text: string): unknown {
  if (!text.startsWith('{') && !text.startsWith('[')) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
