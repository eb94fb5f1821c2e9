/**
 * Reading the room: public info and operator stats (both snapshot-8.lua, which also settles what
 * elapsed time owes, so asking moves the line), and the drawn pre-queue page by page for audit.
 */
import { z } from "zod";
import { entryOf } from "../lottery/draw.js";
import { knownChainName, roundAt, roundTimeMs } from "../lottery/drand.js";
import type { LotteryCommitment, LotteryStore } from "../lottery/store.js";
import { issuesOf, keysFor, notFound, type RestoringContext, type RoomContext } from "./context.js";
import { lineKeys, type WaitingRoomKeys } from "./keys.js";
import { Fields, infoFrom, ReplyShapeError, settingsFrom, statsFrom } from "./replies.js";
import type { InfoResult, LotteryPageResult, NotFound, StatsResult, WaitingRoomInfo } from "./types.js";

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

/** The room's info from Redis alone (no lottery record read). */
export async function roomInfo(ctx: RestoringContext, eventId: string): Promise<InfoResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return readSnapshot(ctx, "info", eventId, k, (f) => ({ info: infoFrom(f) }));
}

export async function info(ctx: RestoringContext, eventId: string): Promise<InfoResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  const result = await readSnapshot(ctx, "info", eventId, k, (f) => ({ info: infoFrom(f) }));
  if (!result.ok || !ctx.lottery) return result;
  const store = ctx.lottery;
  const drawn = result.info.lottery.seed !== undefined;
  let committed = await committedOf(store, eventId).catch(() => null);
  if (committed && drawn && !committed.draw) committed = await committedOf(store, eventId, true).catch(() => null);
  if (!committed) return result;
  return {
    ...result,
    info: {
      ...result.info,
      lottery: publishedLottery(result.info.lottery, committed, result.info.onSaleAt, result.info.state),
    },
  };
}

/**
 * What DynamoDB holds of an event's lottery, read at most every COMMITTED_TTL_MS per process (a
 * beacon recorded on another gateway shows here within that); a record this process changed is
 * read again at once (forgetCommitted), and so is one read before its draw was sealed once Redis
 * shows the draw.
 */
const COMMITTED_TTL_MS = 2_000;
const COMMITTED_CACHED = 1_000;
const committedCaches = new WeakMap<
  LotteryStore,
  Map<string, { at: number; value: Promise<LotteryCommitment | null> }>
>();
function committedOf(store: LotteryStore, eventId: string, fresh = false): Promise<LotteryCommitment | null> {
  let cache = committedCaches.get(store);
  if (!cache) {
    cache = new Map();
    committedCaches.set(store, cache);
  }
  const hit = cache.get(eventId);
  if (hit && !fresh && Date.now() - hit.at < COMMITTED_TTL_MS) return hit.value;
  if (cache.size >= COMMITTED_CACHED) cache.clear();
  const value = store.read(eventId);
  const entry = { at: Date.now(), value };
  cache.set(eventId, entry);
  value.catch(() => cache.get(eventId) === entry && cache.delete(eventId));
  return value;
}

/** Drops this process's cached read of the event's lottery (after this process changed it). */
export function forgetCommitted(store: LotteryStore, eventId: string): void {
  committedCaches.get(store)?.delete(eventId);
}

/**
 * The lottery as published: Redis's, with the drand chain and round (announced from the start),
 * the recorded round once it is in, from DynamoDB; and once a draw is sealed that Redis does not
 * hold (the room was recreated after a wipe), the sealed draw's inputs, which the membership pages
 * then serve from DynamoDB too.
 */
function publishedLottery(
  redis: WaitingRoomInfo["lottery"],
  committed: LotteryCommitment,
  onSaleAt: string,
  state: WaitingRoomInfo["state"],
): WaitingRoomInfo["lottery"] {
  const chain = committed.drandChain;
  const draw = committed.draw;
  const closedAt = draw?.closedAt ?? onSaleAt;
  const round = draw?.round ?? (chain ? roundAt(chain, Date.parse(closedAt)) : undefined);
  const known = chain ? knownChainName(chain) : undefined;
  const beacon = {
    ...(chain && round !== undefined
      ? {
          drand: {
            ...chain,
            round,
            roundAt: new Date(roundTimeMs(chain, round)).toISOString(),
            ...(known ? { knownAs: known } : {}),
          },
        }
      : {}),
    ...(committed.beaconRound ? { beaconRound: committed.beaconRound } : {}),
  };
  if (!draw) {
    const awaiting = chain !== undefined && redis.seed === undefined && state !== "prequeue";
    return {
      ...redis,
      ...beacon,
      ...(committed.beacon && redis.seed === undefined ? { beacon: committed.beacon } : {}),
      ...(awaiting && committed.beacon === undefined ? { awaitingBeacon: true } : {}),
    };
  }
  const closed = draw.closedAt ? { closedAt: draw.closedAt } : {};
  if (redis.seed !== undefined && redis.membershipHash === draw.membershipHash)
    return { ...redis, ...beacon, ...closed };
  return {
    commitment: committed.commitment,
    seed: committed.seed,
    membershipHash: draw.membershipHash,
    ...(draw.beacon ? { beacon: draw.beacon } : {}),
    size: draw.size,
    ...beacon,
    ...closed,
    sealedOnly: true,
  };
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
    // Redis's order while Redis holds the sealed draw (so a place moved in Redis after the draw
    // shows); the sealed order from DynamoDB once the room was recreated after a wipe.
    const sealed = ctx.lottery ? (await committedOf(ctx.lottery, eventId))?.draw : undefined;
    if (sealed && (await ctx.redis.hget(k.room, "membershipHash")) !== sealed.membershipHash) {
      const entries = await ctx.lottery!.entries(eventId, sealed.drawKey, offset, limit);
      return { ok: true as const, preQueued: sealed.size, offset, entries };
    }
    const { reply, outcome } = await ctx.script("lotteryPage", lineKeys(k), [offset, limit]);
    if (outcome === "not_found") return notFound;
    if (outcome === "not_drawn") return { ok: false as const, reason: outcome };
    if (outcome || !Array.isArray(reply)) throw new ReplyShapeError("lotteryPage: unexpected reply");
    const [preQueued, ...onSlot] = reply.map(String);
    // A room whose records live on the fan shards: the drawn places are in the shards' pre-queues
    // (written before the room was marked drawn, draw.ts), none on the event's slot.
    const room = await ctx.fanLine.roomOf(eventId);
    const fanIds =
      room.recordsOnShards && room.beats
        ? await room.beats.records.drawnBetween(eventId, offset + 1, offset + limit)
        : onSlot;
    return { ok: true as const, preQueued: Number(preQueued), offset, entries: fanIds.map(entryOf), fanIds };
  });
}
