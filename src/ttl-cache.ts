/**
 * A tiny in-process cache with a time to live and single flight: many concurrent readers of a
 * missing key share one load. For reads that may be a few seconds stale (event layouts,
 * general-admission counts on the seat map).
 */
export interface TtlCache<T> {
  (key: string): Promise<T>;
  /**
   * The value of a fresh, loaded entry, without waiting and without loading: undefined when the
   * key is missing, stale or still loading (a caller that cannot wait takes its slow path).
   */
  peek(key: string): { value: T } | undefined;
}

export function ttlCache<T>(ttlMs: number, load: (key: string) => Promise<T>, maxEntries = 1_000): TtlCache<T> {
  const entries = new Map<string, { value: Promise<T>; until: number; loaded?: { value: T } }>();
  const read = (key: string): Promise<T> => {
    const now = Date.now();
    const hit = entries.get(key);
    if (hit && hit.until > now) return hit.value;
    if (entries.size >= maxEntries) entries.clear();
    const value = load(key);
    const entry: { value: Promise<T>; until: number; loaded?: { value: T } } = { value, until: now + ttlMs };
    entries.set(key, entry);
    value.then(
      (loaded) => {
        entry.loaded = { value: loaded };
      },
      // A failed load is not cached.
      () => {
        if (entries.get(key) === entry) entries.delete(key);
      },
    );
    return value;
  };
  return Object.assign(read, {
    peek(key: string) {
      const hit = entries.get(key);
      return hit && hit.until > Date.now() ? hit.loaded : undefined;
    },
  });
}
