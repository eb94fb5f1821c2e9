/**
 * "At most once every `everyMs` per key": the returned function says true when `key` may act now
 * (and starts its quiet period), false while it is quiet. For log lines that a Redis outage would
 * repeat on every request, and for background work a burst would start many times. Past `maxKeys`
 * keys it forgets them all: the worst that costs is one act too many.
 */
export function onceEvery(everyMs: number, maxKeys = 10_000): (key: string) => boolean {
  const quietUntil = new Map<string, number>();
  return (key) => {
    const now = Date.now();
    if ((quietUntil.get(key) ?? 0) > now) return false;
    if (quietUntil.size >= maxKeys) quietUntil.clear();
    quietUntil.set(key, now + everyMs);
    return true;
  };
}
