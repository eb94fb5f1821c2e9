/**
 * A tiny in-process cache with a time to live and single flight: many concurrent readers of a
 * missing key share one load. For reads that may be a few seconds stale (event layouts,
 * general-admission counts on the seat map).
 */
export function ttlCache<T>(ttlMs: number, load: (key: string) => Promise<T>, maxEntries = 1_000): TtlCache<T> {
  const entries = new Map<string, { value: Promise<T>; until: number; settled?: { value: T } }>();
  const get = (key: string): Promise<T> => {
    const now = Date.now();
    const hit = entries.get(key);
    if (hit && hit.until > now) return hit.value;
    if (entries.size >= maxEntries) entries.clear();
    const value = load(key);
    const entry: { value: Promise<T>; until: number; settled?: { value: T } } = { value, until: now + ttlMs };
    entries.set(key, entry);
    value.then(
      (v) => {
        entry.settled = { value: v };
      },
      // A failed load is not cached.
      () => entries.delete(key),
    );
    return value;
  };
  return Object.assign(get, {
    peek(key: string): { value: T } | undefined {
      const hit = entries.get(key);
      return hit && hit.until > Date.now() ? hit.settled : undefined;
    },
  });
}

/** A cached read; `peek` gives a value already loaded and still fresh without waiting (or undefined). */
export type TtlCache<T> = ((key: string) => Promise<T>) & { peek(key: string): { value: T } | undefined };
