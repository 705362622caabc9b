/**
 * `work`, or a rejection with the signal's reason once `signal` is aborted, whichever comes
 * first: a publisher stops waiting for the broker when the relay's deadline passes (the work
 * itself goes on; what it resolves to later is not taken for confirmed). Without a signal, `work`.
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
