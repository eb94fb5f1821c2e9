/**
 * How long a fan waits between two queue-status polls, as the fan page does
 * (waiting-room/src/fan.ts): at the gateway's `pollAfterMs` when it gives one (scheduled on the
 * fan's ETA); else never sooner than its `pollAfterSeconds` (up to 30 s for a fan far back in the
 * line), a little later at random so a crowd told the same interval does not arrive at once; 1 s
 * when the poll failed (no advice). The k6 scripts and the Node driver both
 * wait by this. No imports: it runs under k6 and Node alike.
 */

/**
 * Seconds to wait before the next poll. `maxSeconds` caps the wait the gateway asked for (the
 * driver's `maxPollSeconds`, for short test runs); the random part comes on top of it.
 */
export function pollDelaySeconds(
  pollAfterSeconds: number | undefined,
  random: number = Math.random(),
  maxSeconds: number = Number.POSITIVE_INFINITY,
  pollAfterMs?: number,
): number {
  // Scheduled on the fan's ETA: followed as given, with no jitter (the fans' ETAs are spread
  // already, one per place), so the poll lands as the turn comes.
  if (pollAfterMs !== undefined && Number.isFinite(pollAfterMs) && pollAfterMs >= 0) {
    return Math.min(maxSeconds, pollAfterMs / 1000);
  }
  const wait = Math.min(maxSeconds, Math.max(pollAfterSeconds ?? 1, 0.5));
  return wait + random * Math.min(2, wait / 10);
}
