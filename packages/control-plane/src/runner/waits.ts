/** The runner's two waits that end early: on an abort, or at a time limit. */

/** Resolves true after `ms`, false at once when `signal` aborts. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", stop);
      resolve(true);
    }, ms);
    const stop = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", stop, { once: true });
  });
}

/** Waits until every one of `work` settled, or `timeoutMs` passed. */
export async function settleWithin(work: Iterable<Promise<unknown>>, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
  });
  await Promise.race([Promise.allSettled([...work]), timeout]);
  clearTimeout(timer);
}
