/**
 * Bounded concurrency, the one helper for it (the inventory's batch writes and reads, the audit,
 * the test support and the benchmarks use it): `limit` workers, each taking the next item when its
 * call is done, so whatever is called sees a steady `limit` requests at once, never a burst of all.
 */

/** `fn` over `items`, at most `limit` at once; results in the items' order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
  return results;
}
