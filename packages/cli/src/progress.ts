import type { OutputLike } from './io.js';

/** Reports a running count against an estimated total. */
export interface Progress {
  /** The running total changed. */
  update(done: number): void;
  /** The work ended (completed, stopped or failed) at this total. */
  finish(done: number): void;
}

/** Options of {@link createProgress}. */
export interface ProgressOptions {
  /** What is counted, plural: `rows`. */
  readonly unit: string;
  /** The verb of a plain line: `purged` gives `purged 300/1000 rows`. */
  readonly verb: string;
  /** The expected total; the bar is drawn against it. 0 when unknown. */
  readonly total: number;
  /** Plain-line mode prints at most one line per this many ms (plus the last). @default 1000 */
  readonly intervalMs?: number;
  /** The clock, in ms. @default Date.now */
  readonly now?: () => number;
}

const BAR_WIDTH = 30;

/**
 * A progress bar redrawn in place on a terminal, or plain lines (throttled) when the stream is a
 * file or a pipe, where carriage returns would only garble a log.
 */
export function createProgress(stream: OutputLike, options: ProgressOptions): Progress {
  const { unit, verb, total } = options;
  const intervalMs = options.intervalMs ?? 1000;
  const now = options.now ?? Date.now;
  const of = (done: number) => (total > 0 ? `${done}/${Math.max(total, done)} ${unit}` : `${done} ${unit}`);

  if (stream.isTTY) {
    const draw = (done: number) => stream.write(`\r${renderBar(done, total)} ${of(done)}`);
    return {
      update: draw,
      finish(done) {
        draw(done);
        stream.write('\n');
      },
    };
  }
  let last = Number.NEGATIVE_INFINITY;
  let printed = -1;
  const line = (done: number) => {
    stream.write(`${verb} ${of(done)}\n`);
    printed = done;
    last = now();
  };
  return {
    update(done) {
      if (now() - last >= intervalMs) line(done);
    },
    finish(done) {
      if (printed !== done) line(done);
    },
  };
}

/** `[#########.....................]  30%`: the bar alone, for a count against a total. */
export function renderBar(done: number, total: number): string {
  const ratio = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(ratio * BAR_WIDTH);
  const pct = `${Math.floor(ratio * 100)}%`.padStart(4);
  return `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${pct}`;
}
