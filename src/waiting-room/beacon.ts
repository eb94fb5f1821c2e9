/**
 * The draw's public beacon (issue 29 item 1): a drand round nobody in the operation can choose or
 * withhold to their advantage.
 *
 *  - The event's waiting-room config names a drand chain (src/lottery/drand.ts), kept with the
 *    seed's commitment in DynamoDB before the pre-queue closes and never changed after.
 *  - The round is fixed by the close: the first round published at or after it (the close is the
 *    event's on-sale time, or the moment of an `open-now`). Fans see it announced from the start.
 *  - The only beacon taken is that round, `{round, signature}` (and the previous signature on a
 *    chained scheme), whose BLS signature verifies under the chain's public key; its value is
 *    drand's randomness, SHA-256 of the signature. BLS signatures are unique, so there is exactly
 *    one value to record: nothing to try values with.
 *  - Until it is recorded the draw waits, however long: a withheld beacon delays the draw (the fan
 *    page says why), it never gives a second order to choose from.
 *
 * An event with no chain draws with no beacon (B = "") and takes none.
 */
import { type DrandBeacon, roundAt, roundTimeMs, verifyBeacon } from "../lottery/drand.js";
import type { RoomContext } from "./context.js";
import { keysFor, notFound } from "./context.js";
import type { NotFound, Unavailable } from "./types.js";

export type BeaconResult =
  | { ok: true; beacon: string; round: DrandBeacon }
  | NotFound
  /** The pre-queue has not closed: the round is not due yet (it is published after the close). */
  | { ok: false; reason: "lottery_open"; round: number; roundAt: string }
  | { ok: false; reason: "lottery_drawn" }
  /** Not the round of this draw. */
  | { ok: false; reason: "wrong_round"; round: number; roundAt: string }
  /** The signature does not verify under the chain's public key (or is not well formed). */
  | { ok: false; reason: "invalid_beacon"; message: string }
  /** No lottery store (a room without DynamoDB), no commitment, or no drand chain named for this event. */
  | { ok: false; reason: "no_lottery" | "no_beacon_chain" }
  | Unavailable;

export async function recordBeacon(ctx: RoomContext, eventId: string, beacon: DrandBeacon): Promise<BeaconResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  const lottery = ctx.lottery;
  if (!lottery) return { ok: false, reason: "no_lottery" };
  try {
    const [committed, room] = await Promise.all([
      lottery.read(eventId),
      ctx.redis.hmget(k.room, "openedAt", "onSaleAt"),
    ]);
    if (!committed) return { ok: false, reason: "no_lottery" };
    const chain = committed.drandChain;
    if (!chain) return { ok: false, reason: "no_beacon_chain" };
    if (committed.draw) return { ok: false, reason: "lottery_drawn" };
    const [openedAt, onSaleAt] = room.map((v) => Number(v ?? 0));
    if (!onSaleAt) return notFound;
    if (!openedAt) {
      const round = roundAt(chain, onSaleAt);
      return { ok: false, reason: "lottery_open", round, roundAt: new Date(roundTimeMs(chain, round)).toISOString() };
    }
    const round = roundAt(chain, openedAt);
    if (beacon.round !== round)
      return { ok: false, reason: "wrong_round", round, roundAt: new Date(roundTimeMs(chain, round)).toISOString() };
    const check = verifyBeacon(chain, beacon);
    if (!check.ok) return { ok: false, reason: "invalid_beacon", message: check.message };
    const out = await lottery.recordBeacon(eventId, { value: check.randomness, round: beacon });
    if (out.ok) return { ok: true, beacon: out.beacon, round: out.beaconRound };
    if (out.reason === "drawn") return { ok: false, reason: "lottery_drawn" };
    if (out.reason === "not_committed") return { ok: false, reason: "no_beacon_chain" };
    // A verified round of the same chain has one value: another recorded one is not this round's.
    return { ok: false, reason: "wrong_round", round, roundAt: new Date(roundTimeMs(chain, round)).toISOString() };
  } catch (err) {
    ctx.log?.error({ err, eventId }, "recording the beacon failed");
    return { ok: false, reason: "unavailable", message: (err as Error).message };
  }
}
