/**
 * The draw's public beacon (issue 18 item 2): a value nobody inside controls, mixed into the draw
 * key (src/lottery/draw.ts), recorded by the operator in DynamoDB with the seed's commitment.
 *
 * Two parts, each recorded once:
 *  - the source, before the pre-queue closes: where the value will come from, named so that
 *    anyone can look it up, e.g. "drand quicknet round 12345678" for a round published after the
 *    close;
 *  - the value: any time until the draw is sealed, but only for a source recorded before the
 *    close. A value recorded after the close with no source named before it would let whoever
 *    knows the seed and the membership pick the order.
 * While a source waits for its value the draw waits too, at most the store's `beaconWaitMs` after
 * the close (10 minutes by default); then it draws with no beacon and publishes `beaconMissed`.
 */
import type { RoomContext } from "./context.js";
import { keysFor, notFound } from "./context.js";
import type { NotFound, Unavailable, WaitingRoomInfo } from "./types.js";

export type BeaconResult =
  | { ok: true; beaconSource?: string; beacon?: string }
  | NotFound
  /** The pre-queue has closed and the change needs it open (a source, or a value without one). */
  | { ok: false; reason: "lottery_closed" }
  | { ok: false; reason: "lottery_drawn" }
  /** Another source or value is recorded already: what is recorded. */
  | { ok: false; reason: "beacon_conflict"; beaconSource?: string; beacon?: string }
  /** No lottery store (a room without DynamoDB) or no commitment for this event. */
  | { ok: false; reason: "no_lottery" }
  | Unavailable;

export async function recordBeacon(
  ctx: RoomContext,
  readInfo: (eventId: string) => Promise<{ ok: true; info: WaitingRoomInfo } | { ok: false; reason: string }>,
  eventId: string,
  beacon: { source?: string; value?: string },
  now: () => number = Date.now,
): Promise<BeaconResult> {
  if (!keysFor(eventId)) return notFound;
  const lottery = ctx.lottery;
  if (!lottery) return { ok: false, reason: "no_lottery" };
  const room = await readInfo(eventId);
  if (!room.ok) {
    if (room.reason === "not_found") return notFound;
    return { ok: false, reason: "unavailable", message: "the waiting room is unavailable" };
  }
  try {
    const committed = await lottery.read(eventId);
    if (!committed) return { ok: false, reason: "no_lottery" };
    if (committed.draw) return { ok: false, reason: "lottery_drawn" };
    const open = room.info.state === "prequeue" && now() < Date.parse(room.info.onSaleAt);
    const needsOpen = beacon.source !== undefined ? committed.beaconSource !== beacon.source : !committed.beaconSource;
    if (needsOpen && !open) return { ok: false, reason: "lottery_closed" };
    const out = await lottery.recordBeacon(eventId, beacon);
    if (out.ok) return out;
    if (out.reason !== "conflict") {
      return { ok: false, reason: out.reason === "drawn" ? "lottery_drawn" : "no_lottery" };
    }
    return {
      ok: false,
      reason: "beacon_conflict",
      ...(out.beaconSource === undefined ? {} : { beaconSource: out.beaconSource }),
      ...(out.beacon === undefined ? {} : { beacon: out.beacon }),
    };
  } catch (err) {
    ctx.log?.error({ err, eventId }, "recording the beacon failed");
    return { ok: false, reason: "unavailable", message: (err as Error).message };
  }
}
