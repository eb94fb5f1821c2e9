/**
 * Calls with a bounded number in flight, for the benchmarks: `concurrency` workers, each taking
 * the next index when its call is done, so the store sees a steady `concurrency` requests at once.
 * (src/ has its own, mapLimit in src/inventory/store.ts and eachLimit in src/audit/audit.ts: the
 * scripts do not reach into an adapter's internals for it.)
 */

/** `fn(0)` to `fn(n - 1)`, at most `concurrency` in flight. */
export async function forEachIndex(n: number, concurrency: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** `n` calls of `fn`, `concurrency` in flight; milliseconds taken. */
export async function timed(n: number, concurrency: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await forEachIndex(n, concurrency, fn);
  return performance.now() - started;
}
