/**
 * Calls with a bounded number in flight, for the benchmarks: `concurrency` workers, each taking
 * the next index when its call is done, so the store sees a steady `concurrency` requests at once.
 * Built on src/concurrency.ts's mapLimit, the tree's one bounded-concurrency helper.
 */
import { mapLimit } from "../../src/concurrency.js";

/** `fn(0)` to `fn(n - 1)`, at most `concurrency` in flight. */
export async function forEachIndex(n: number, concurrency: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  await mapLimit(
    Array.from({ length: n }, (_, i) => i),
    concurrency,
    (i) => fn(i),
  );
}

/** `n` calls of `fn`, `concurrency` in flight; milliseconds taken. */
export async function timed(n: number, concurrency: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await forEachIndex(n, concurrency, fn);
  return performance.now() - started;
}
