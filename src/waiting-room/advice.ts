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
  /**
   * Every session slot is taken (maxActive): admission waits for sessions to end, so the rate is
   * a measurement, not a schedule, and polls keep at least a second apart.
   */
  roomFull?: boolean;
  /** In [0, 1): where in the spread of the pre-queue's first polls after the draw this fan falls. */
  random?: number;
}

export interface Advice {
  etaSeconds: number | null;
  pollAfterSeconds: number;
  /**
   * When to poll, in milliseconds, scheduled on the fan's own ETA: present while admission runs
   * (or the draw is coming), absent when the fan can only wait (paused, closed, done). A client
   * that follows it polls at the moment its turn comes, without a jitter of its own: the fans'
   * ETAs are spread already, one per place. `pollAfterSeconds` stays the coarse advice for
   * clients that do not read this.
   */
  pollAfterMs?: number;
}

const MAX_POLL_SECONDS = 30;
const PAUSED_POLL_SECONDS = 10;
const DONE_POLL_SECONDS = 30;

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

/**
 * A poll scheduled on the ETA comes this long after the predicted admission. The poll itself
 * makes the admission (the line's tick runs inside it, lua/waiting-room/includes/admission.lua),
 * so it only has to land after the budget for the fan's place has accrued.
 */
export const ETA_MARGIN_MS = 20;
/** No poll sooner than this after the last. */
export const MIN_POLL_MS = 100;
/**
 * The pre-queue's first polls after the draw are spread at this many a second (each fan's
 * offset drawn at random over the spread), so a large pre-queue does not land in one instant;
 * 1,000 pre-queued fans spread over 50 ms.
 */
export const DRAW_POLLS_PER_SECOND = 20_000;

/**
 * ETA = (fans ahead + 1) / effective admission rate, rounded up (null when nothing is being
 * admitted); `pollAfterMs` is the poll scheduled on it (see Advice). Before the draw the expected half of the pre-queue is ahead, and the on-sale has to
 * come first. Polls come sooner near the front (a quarter of the ETA, 1..30 s) and always well inside
 * abandonSeconds, so a fan who follows the advice never loses the place.
 */
export function adviseFan(input: AdviceInput): Advice {
  const keepPlace = Math.max(1, Math.floor(input.abandonSeconds / 3));
  switch (input.status) {
    case "prequeue": {
      const until = Math.max(0, input.untilOnSaleSeconds);
      const eta = input.admitPerSecond > 0 ? Math.ceil(until + input.ahead / 2 / input.admitPerSecond) : null;
      // the place cannot be lost before the draw; come back at the on-sale, spread a little
      const spreadMs = ((input.ahead + 1) / DRAW_POLLS_PER_SECOND) * 1000 * (input.random ?? Math.random());
      const pollAfterMs = Math.round(
        until * 1000 > MAX_POLL_SECONDS * 1000
          ? MAX_POLL_SECONDS * 1000
          : Math.max(MIN_POLL_MS, until * 1000 + ETA_MARGIN_MS + spreadMs),
      );
      return { etaSeconds: eta, pollAfterSeconds: clamp(Math.ceil(until), 1, MAX_POLL_SECONDS), pollAfterMs };
    }
    case "waiting": {
      if (input.effectiveRate <= 0) {
        return { etaSeconds: null, pollAfterSeconds: Math.min(PAUSED_POLL_SECONDS, keepPlace) };
      }
      // the fan's own admission is the (ahead + 1)th: at the front it is 1/rate away, not 0
      const untilMs = ((input.ahead + 1) / input.effectiveRate) * 1000;
      const eta = Math.ceil(untilMs / 1000);
      // Within 30 s (and the place's keep-alive): poll when the turn comes. Further back: at half
      // the ETA, each poll a fresher estimate, until the turn is within reach.
      const limitMs = Math.min(MAX_POLL_SECONDS, keepPlace) * 1000;
      // While the room is full the turn comes when sessions end, not on a schedule: polls keep
      // at least a second apart, as the coarse advice's do.
      const minMs = input.roomFull ? 1000 : MIN_POLL_MS;
      const pollAfterMs = Math.round(
        untilMs + ETA_MARGIN_MS <= limitMs
          ? Math.max(minMs, untilMs + ETA_MARGIN_MS)
          : Math.max(minMs, Math.min(limitMs, untilMs / 2)),
      );
      return {
        etaSeconds: eta,
        pollAfterSeconds: Math.min(clamp(Math.ceil(eta / 4), 1, MAX_POLL_SECONDS), keepPlace),
        pollAfterMs,
      };
    }
    case "admitted":
      return { etaSeconds: 0, pollAfterSeconds: DONE_POLL_SECONDS };
    default:
      return { etaSeconds: null, pollAfterSeconds: DONE_POLL_SECONDS };
  }
}
