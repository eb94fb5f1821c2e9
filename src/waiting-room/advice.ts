/**
 * What a fan is told beyond the place itself: an ETA and when to ask again. Pure functions, so
 * the rules are tested without Redis.
 */
import type { FanStatusName } from "./types.js";

export interface AdviceInput {
  status: FanStatusName;
  /** Fans still ahead; for the pre-queue, every other pre-queued fan. */
  ahead: number;
  /** Admissions per second a waiting fan can expect now (0 while paused or closed). */
  effectiveRate: number;
  /** The operator's admitPerSecond (the expectation before the room opens). */
  admitPerSecond: number;
  /** Seconds from now to onSaleAt (0 once passed). */
  untilOnSaleSeconds: number;
  abandonSeconds: number;
}

export interface Advice {
  etaSeconds: number | null;
  pollAfterSeconds: number;
}

const MAX_POLL_SECONDS = 30;
const PAUSED_POLL_SECONDS = 10;
const DONE_POLL_SECONDS = 30;

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

/**
 * ETA = (fans ahead + 1) / effective admission rate, rounded up (null when nothing is being
 * admitted). Before the draw the expected half of the pre-queue is ahead, and the on-sale has to
 * come first. Polls come sooner near the front (a quarter of the ETA, 1..30 s) and always well inside
 * abandonSeconds, so a fan who follows the advice never loses the place.
 */
export function adviseFan(input: AdviceInput): Advice {
  const keepPlace = Math.max(1, Math.floor(input.abandonSeconds / 3));
  switch (input.status) {
    case "prequeue": {
      const until = Math.max(0, input.untilOnSaleSeconds);
      const eta = input.admitPerSecond > 0 ? Math.ceil(until + input.ahead / 2 / input.admitPerSecond) : null;
      // the place cannot be lost before the draw; come back at the on-sale
      return { etaSeconds: eta, pollAfterSeconds: clamp(Math.ceil(until), 1, MAX_POLL_SECONDS) };
    }
    case "waiting": {
      if (input.effectiveRate <= 0) {
        return { etaSeconds: null, pollAfterSeconds: Math.min(PAUSED_POLL_SECONDS, keepPlace) };
      }
      // the fan's own admission is the (ahead + 1)th: at the front it is 1/rate away, not 0
      const eta = Math.ceil((input.ahead + 1) / input.effectiveRate);
      return {
        etaSeconds: eta,
        pollAfterSeconds: Math.min(clamp(Math.ceil(eta / 4), 1, MAX_POLL_SECONDS), keepPlace),
      };
    }
    case "admitted":
      return { etaSeconds: 0, pollAfterSeconds: DONE_POLL_SECONDS };
    default:
      return { etaSeconds: null, pollAfterSeconds: DONE_POLL_SECONDS };
  }
}
