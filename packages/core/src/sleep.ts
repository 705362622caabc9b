/**
 * Waits `ms`, or less when `signal` is aborted first (at once if it already is); never rejects.
 * For a consumer's backoffs and retry waits, which `stop()` must be able to cut short.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
