/**
 * A tiny in-process cache with a time to live and single flight: many concurrent readers of a
 * missing key share one load. For reads that may be a few seconds stale (event layouts,
 * general-admission counts on the seat map).
 */
export function ttlCache<T>(ttlMs: number, load: (key: string) => Promise<T>, maxEntries = 1_000) {
  const entries = new Map<string, { value: Promise<T>; until: number }>();
  return (key: string): Promise<T> => {
    const now = Date.now();
    const hit = entries.get(key);
    if (hit && hit.until > now) return hit.value;
    if (entries.size >= maxEntries) entries.clear();
    const value = load(key);
    entries.set(key, { value, until: now + ttlMs });
    // A failed load is not cached.
    value.catch(() => entries.delete(key));
    return value;
  };
}
