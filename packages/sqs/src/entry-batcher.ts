/** What SQS's *Batch calls report for each entry. */
export interface BatchResponseLike {
  Successful?: { Id?: string | undefined }[] | undefined;
  Failed?: { Id?: string | undefined; Code?: string | undefined; Message?: string | undefined }[] | undefined;
}

/** The fate of one entry of a batch call. */
export type EntryResult = { ok: true } | { ok: false; code: string; message: string };

/** An entry that went through (one frozen object, not one per entry). */
const OK: EntryResult = Object.freeze({ ok: true });

/** SQS takes at most ten entries per batch call. */
export const SQS_BATCH_MAX = 10;

interface Pending<E> {
  entry: E;
  done: (r: EntryResult, context: unknown) => void;
  context: unknown;
}

/**
 * Gathers single operations (delete, change visibility) into SQS batch calls of up to ten,
 * flushed when ten are waiting or `lingerMs` after the first one (fewer, fuller calls: each SQS
 * request costs a signed HTTP round trip). A batch call can succeed
 * as a whole and still fail some entries, so each entry's own result is returned; a call that
 * fails as a whole is tried `attempts` times. Never rejects.
 */
export class EntryBatcher<E> {
  readonly #send: (entries: (E & { Id: string })[]) => Promise<BatchResponseLike>;
  readonly #attempts: number;
  readonly #retryDelayMs: number;
  readonly #lingerMs: number;
  #buffer: Pending<E>[] = [];
  #scheduled: NodeJS.Timeout | undefined;
  #soon: NodeJS.Immediate | undefined;
  readonly #inFlight = new Set<Promise<void>>();

  constructor(
    send: (entries: (E & { Id: string })[]) => Promise<BatchResponseLike>,
    options: { attempts?: number; retryDelayMs?: number; lingerMs?: number } = {},
  ) {
    this.#send = send;
    this.#attempts = options.attempts ?? 3;
    this.#retryDelayMs = options.retryDelayMs ?? 100;
    this.#lingerMs = options.lingerMs ?? 0;
  }

  /** Queues one entry; resolves with its own result once its batch call returned. */
  add(entry: E): Promise<EntryResult> {
    return new Promise((resolve) => this.queue(entry, resolve, undefined));
  }

  /**
   * Queues one entry; `done(result, context)` gets its own result once its batch call returned.
   * No promise per entry: a settle per message is the hot path, and `drain()` already waits for
   * every call in flight.
   */
  queue<C>(entry: E, done: (r: EntryResult, context: C) => void, context: C): void {
    this.#buffer.push({ entry, done: done as Pending<E>['done'], context });
    if (this.#buffer.length >= SQS_BATCH_MAX) this.#flush();
    else this.#scheduled ??= setTimeout(() => this.#flush(), this.#lingerMs);
  }

  /** Sends what is buffered on the next turn of the event loop, without waiting out `lingerMs`. */
  flushSoon(): void {
    if (this.#buffer.length === 0 || this.#soon) return;
    this.#soon = setImmediate(() => this.#flush());
  }

  /** Sends whatever is buffered and waits for every call in flight. */
  async drain(): Promise<void> {
    this.#flush();
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight]);
  }

  #flush(): void {
    if (this.#scheduled) clearTimeout(this.#scheduled);
    if (this.#soon) clearImmediate(this.#soon);
    this.#scheduled = undefined;
    this.#soon = undefined;
    while (this.#buffer.length > 0) {
      const chunk = this.#buffer.splice(0, SQS_BATCH_MAX);
      const call = this.#call(chunk).finally(() => this.#inFlight.delete(call));
      this.#inFlight.add(call);
    }
  }

  async #call(chunk: Pending<E>[]): Promise<void> {
    const entries = chunk.map((p, i) => ({ ...p.entry, Id: String(i) }));
    let lastError: unknown;
    for (let attempt = 1; attempt <= this.#attempts; attempt++) {
      try {
        const res = await this.#send(entries);
        const ok = new Set((res.Successful ?? []).map((s) => s.Id));
        const failed = new Map((res.Failed ?? []).map((f) => [f.Id, f]));
        chunk.forEach((p, i) => {
          const id = String(i);
          const f = failed.get(id);
          if (f)
            p.done({ ok: false, code: f.Code ?? 'Failed', message: f.Message ?? 'entry failed' }, p.context);
          else if (ok.has(id)) p.done(OK, p.context);
          else
            p.done(
              {
                ok: false,
                code: 'Missing',
                message: 'the response named this entry neither successful nor failed',
              },
              p.context,
            );
        });
        return;
      } catch (err) {
        lastError = err;
        if (attempt < this.#attempts)
          await new Promise((r) => setTimeout(r, this.#retryDelayMs * 2 ** (attempt - 1)));
      }
    }
    const code = (lastError as { name?: string })?.name ?? 'Error';
    const message = (lastError as { message?: string })?.message ?? String(lastError);
    for (const p of chunk) p.done({ ok: false, code, message }, p.context);
  }
}
