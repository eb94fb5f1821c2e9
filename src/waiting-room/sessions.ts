/**
 * Admitted sessions: ending one (end-session-8.lua: the fan bought, or the operator revoked it)
 * and the claim path's check that one is still active (session-active-3.lua, one round trip).
 */
import { sessionAnswer } from "./codes.js";
import { keysFor, notFound, type RestoringContext, type RoomContext } from "./context.js";
import { lineKeys } from "./keys.js";
import { FAN_STATUSES, Fields, ReplyShapeError } from "./replies.js";
import type { EndSessionResult, SessionActiveResult } from "./types.js";

export async function endSession(
  ctx: RoomContext,
  eventId: string,
  sessionId: string,
  reason: "completed" | "revoked",
): Promise<EndSessionResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return ctx.guarded(`${reason}Session`, eventId, async () => {
    const { reply, outcome } = await ctx.script("endSession", lineKeys(k), [sessionId, reason]);
    if (outcome === "not_found") return notFound;
    if (outcome === "unknown_session") return { ok: false as const, reason: outcome };
    if (outcome) throw new ReplyShapeError(`endSession: unexpected ${outcome}`);
    const f = new Fields(reply);
    if (reason === "revoked") {
      ctx.log?.info({ eventId, sessionId }, "session revoked");
      // A room whose records live on the fan shards: the fan barred on its shard too (its record r)
      const room = await ctx.fanLine.roomOf(eventId);
      if (room.recordsOnShards && room.beats) await room.beats.records.revoke(eventId, f.str("fanId"));
    }
    return {
      ok: true as const,
      freed: f.flag("freed"),
      fanId: f.str("fanId"),
      status: f.oneOf("status", FAN_STATUSES),
    };
  });
}

export async function isSessionActive(
  ctx: RestoringContext,
  eventId: string,
  sessionId: string,
  epoch: string | undefined,
  fanId?: string,
): Promise<SessionActiveResult> {
  const k = keysFor(eventId);
  if (!k) return { ok: true, active: false, decided: true };
  return ctx.guarded("isSessionActive", eventId, async () => {
    const mode = epoch === undefined ? "strict" : "epoch";
    const answer = sessionAnswer(
      await ctx.run("sessionActive", [k.room, k.active, k.fans], [sessionId, epoch ?? "", mode, fanId ?? ""]),
    );
    if (answer === "no_room") {
      // No room: Redis lost it. Bring it back for the fans still in line; this claim goes on.
      void ctx.restoreRoom(eventId).catch(() => undefined);
      return { ok: true as const, active: false, decided: false };
    }
    if (answer === "other_epoch") return { ok: true as const, active: false, decided: false };
    return { ok: true as const, active: answer === "active", decided: true };
  });
}
