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
  /**
   * For a pre-queued fan once the on-sale has passed and the pre-queue is not drawn yet: how long
   * ago the close was, in milliseconds (absent otherwise). The draw is running, or waiting for its
   * beacon's value (docs/waiting-room.md, "The lottery").
   */
  drawPendingMs?: number;
  /**
   * How long after the close the draw starts (DRAW_GRACE_MS in a room whose records live on the fan
   * shards, which waits for joins in flight; 0 otherwise): counted into the draw's expected time.
   */
  drawGraceMs?: number;
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
 * A draw with no beacon to wait for is expected done this long after the close, plus
 * DRAW_MS_PER_FAN for each pre-queued fan: about twice what draws took against DynamoDB Local
 * (80 ms for 1,000 fans, 200 ms for 10,000, 760 ms for 50,000, open-now's round trip included).
 * Until then a pre-queued fan polls again when the draw should be done; a draw still pending past
 * it is waiting for its beacon (or slow), and the fans poll at the DRAW_WAIT_* pace.
 */
export const DRAW_EXPECTED_MS = 250;
/**
 * A room whose records live on the fan shards (`claims` 2): how long after the close the draw
 * waits before it freezes the shards' pre-queues, so that a pre-queue join whose range the event's
 * slot gave before the close has written its record (docs/redis-cluster.md "Steps 2 and 3, call
 * by call", step 6). A join later than this is refused by its frozen shard and takes a place after
 * the pre-queue. The advice counts it into the draw's expected time (`drawGraceMs`): without it a
 * pre-queued fan polling at the close was told the draw was overdue and to come back in 2-5 s,
 * and the first fans the cursor passed after the draw learned it seconds late.
 */
export const DRAW_GRACE_MS = 2_000;
export const DRAW_MS_PER_FAN = 0.03;
/**
 * While an overdue draw waits, a pre-queued fan polls again DRAW_WAIT_POLL_MS plus a random part
 * of a spread: DRAW_WAIT_SPREAD_MS, or the pre-queue's size at DRAW_WAIT_POLLS_PER_SECOND when
 * that is longer. Not sooner than 2 s: once the beacon's value is recorded the draw starts within
 * a second (each gateway tries a waiting draw once a second), so sooner polls would learn of it
 * hardly sooner, and the wait can last 10 minutes. Polls 2-5 s apart for up to 7,500 fans; a
 * fan's polls are on average more than half the spread apart, so the pre-queue's stay under 5,000
 * a second (about a third of the status polls one event's Redis core answers) until the cap at a
 * third of abandonSeconds cuts the spread (past about 45,000 fans at the default 60 s).
 */
export const DRAW_WAIT_POLL_MS = 2_000;
export const DRAW_WAIT_SPREAD_MS = 3_000;
export const DRAW_WAIT_POLLS_PER_SECOND = 2_500;

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
      if (input.drawPendingMs !== undefined) return adviseDrawPending(input, input.drawPendingMs, keepPlace);
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

/**
 * A pre-queued fan after the on-sale, before the draw. A poll cannot tell from Redis whether
 * a beacon is awaited (its source is recorded in DynamoDB), but a draw without one is done within
 * DRAW_EXPECTED_MS + DRAW_MS_PER_FAN a fan of the close: until then the fan polls again as the draw
 * should end (spread as at the on-sale), and the ETA counts the rest of the draw; past that the
 * draw waits for its beacon (up to 10 minutes): no ETA, and polls 2-5 s apart (longer for a large
 * pre-queue), never later than a third of abandonSeconds.
 */
function adviseDrawPending(input: AdviceInput, pendingMs: number, keepPlace: number): Advice {
  const fans = input.ahead + 1;
  const random = input.random ?? Math.random();
  const limitMs = Math.min(MAX_POLL_SECONDS, keepPlace) * 1000;
  const drawLeftMs = (input.drawGraceMs ?? 0) + DRAW_EXPECTED_MS + fans * DRAW_MS_PER_FAN - Math.max(0, pendingMs);
  if (drawLeftMs > 0) {
    const spreadMs = (fans / DRAW_POLLS_PER_SECOND) * 1000 * random;
    const eta = input.admitPerSecond > 0 ? Math.ceil(drawLeftMs / 1000 + input.ahead / 2 / input.admitPerSecond) : null;
    return {
      etaSeconds: eta,
      pollAfterSeconds: clamp(Math.ceil(drawLeftMs / 1000), 1, Math.min(MAX_POLL_SECONDS, keepPlace)),
      pollAfterMs: Math.round(Math.min(limitMs, Math.max(MIN_POLL_MS, drawLeftMs + ETA_MARGIN_MS + spreadMs))),
    };
  }
  const spreadMs = Math.max(DRAW_WAIT_SPREAD_MS, (fans / DRAW_WAIT_POLLS_PER_SECOND) * 1000);
  return {
    etaSeconds: null,
    pollAfterSeconds: Math.min(Math.ceil((DRAW_WAIT_POLL_MS + spreadMs / 2) / 1000), MAX_POLL_SECONDS, keepPlace),
    pollAfterMs: Math.round(Math.min(limitMs, DRAW_WAIT_POLL_MS + spreadMs * random)),
  };
}
