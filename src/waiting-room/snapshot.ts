/**
 * Reading the room: public info and operator stats (both snapshot-8.lua, which also settles what
 * elapsed time owes, so asking moves the line), and the drawn pre-queue page by page for audit.
 */
import { z } from "zod";
import { issuesOf, keysFor, notFound, type RestoringContext, type RoomContext } from "./context.js";
import { lineKeys, type WaitingRoomKeys } from "./keys.js";
import { Fields, infoFrom, ReplyShapeError, settingsFrom, statsFrom } from "./replies.js";
import type { InfoResult, LotteryPageResult, NotFound, StatsResult } from "./types.js";

const pageSchema = z.object({
  offset: z.number().int().min(0),
  limit: z.number().int().min(1).max(1_000),
});

/** The snapshot's fields, or not_found; restores a room Redis lost first. */
async function readSnapshot<T>(
  ctx: RestoringContext,
  op: "info" | "stats",
  eventId: string,
  k: WaitingRoomKeys,
  read: (f: Fields) => T,
) {
  return ctx.withRestore(eventId, () =>
    ctx.guarded(op, eventId, async (): Promise<({ ok: true } & T) | NotFound> => {
      const { reply, outcome } = await ctx.script("snapshot", lineKeys(k));
      if (outcome === "not_found") return notFound;
      if (outcome) throw new ReplyShapeError(`snapshot: unexpected ${outcome}`);
      return { ok: true as const, ...read(new Fields(reply)) };
    }),
  );
}

export async function info(ctx: RestoringContext, eventId: string): Promise<InfoResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return readSnapshot(ctx, "info", eventId, k, (f) => ({ info: infoFrom(f) }));
}

export async function stats(ctx: RestoringContext, eventId: string): Promise<StatsResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return readSnapshot(ctx, "stats", eventId, k, (f) => ({ stats: statsFrom(f), settings: settingsFrom(f) }));
}

export async function lotteryPage(
  ctx: RoomContext,
  eventId: string,
  page: { offset: number; limit: number },
): Promise<LotteryPageResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  const parsed = pageSchema.safeParse(page);
  if (!parsed.success) return { ok: false, reason: "invalid", issues: issuesOf(parsed.error) };
  const { offset, limit } = parsed.data;
  return ctx.guarded("lotteryPage", eventId, async () => {
    const { reply, outcome } = await ctx.script("lotteryPage", lineKeys(k), [offset, limit]);
    if (outcome === "not_found") return notFound;
    if (outcome === "not_drawn") return { ok: false as const, reason: outcome };
    if (outcome || !Array.isArray(reply)) throw new ReplyShapeError("lotteryPage: unexpected reply");
    const [preQueued, ...fanIds] = reply.map(String);
    return { ok: true as const, preQueued: Number(preQueued), offset, fanIds };
  });
}
