/**
 * `work`, or a rejection with the signal's reason once `signal` is aborted, whichever comes
 * first: a publisher stops waiting for the broker when the relay's deadline passes (the work
 * itself goes on; what it resolves to later is not taken for confirmed). `onAbort` runs when the
 * signal wins, for a publisher whose client cannot cancel a request to give up the connection it
 * is on. Without a signal, `work`.
 */
export function untilAborted<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  onAbort?: () => void,
): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) {
    work.catch(() => {}); // nobody awaits it now
    onAbort?.();
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const abort = () => {
      onAbort?.();
      reject(signal.reason);
    };
    signal.addEventListener('abort', abort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', abort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(err);
      },
    );
  });
}
