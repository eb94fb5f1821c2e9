/**
 * The draw, in batches (issue 18 item 2): once the pre-queue has closed (Redis time reached
 * onSaleAt; see lua/waiting-room/includes/prequeue.lua), whichever process holds the event's draw
 * lock reads the frozen membership with ZSCAN pages, computes the order from the committed seed,
 * the membership hash and the beacon (src/lottery/draw.ts), writes each fan's place as its score
 * in pipelined chunks, then flips `drawn` in one Lua call (lottery-drawn-8.lua). No call blocks
 * Redis for more than a page or a chunk, whatever the pre-queue's size.
 *
 * Crash safe: nothing reads a place before `drawn`, and a rerun from scratch computes the same
 * order from the same inputs and writes the same places; the lock expires if its holder dies.
 */
import { randomBytes } from "node:crypto";
import { drawKey, drawOrder, entryOf, membershipHash } from "../lottery/draw.js";
import { keysFor, notFound, type RoomContext } from "./context.js";
import { lineKeys } from "./keys.js";
import { Fields, infoFrom, ReplyShapeError } from "./replies.js";
import type { NotFound, Unavailable, WaitingRoomInfo } from "./types.js";

const SCAN_COUNT = 1_000;
const WRITE_CHUNK = 1_000;
/** Longer than a draw of a million fans takes; a dead holder's lock is free after it. */
const LOCK_MS = 120_000;

export type DrawResult =
  | { ok: true; changed: boolean; info: WaitingRoomInfo }
  | { ok: false; reason: "not_closed" | "drawing" }
  | NotFound
  | Unavailable;

export async function drawPreQueue(ctx: RoomContext, eventId: string): Promise<DrawResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  const lockKey = `${k.room}:draw-lock`;
  return ctx.guarded("draw", eventId, async (): Promise<DrawResult> => {
    const { redis } = ctx;
    const [openedAt, drawn, preCount, seed, beacon] = await redis.hmget(
      k.room,
      "openedAt",
      "drawn",
      "preCount",
      "seed",
      "beacon",
    );
    if (seed === null || seed === undefined) return notFound;
    if (!openedAt || openedAt === "0") return { ok: false, reason: "not_closed" };
    if (drawn === "1") {
      // An empty pre-queue was marked drawn at the close; with the seed kept out of Redis it is
      // revealed now, with the membership hash of no entries (the recipe holds for size 0).
      if (seed === "" && ctx.lottery && Number(preCount ?? 0) === 0) {
        const committed = await ctx.lottery.read(eventId);
        if (committed && /^[0-9a-f]{64}$/.test(committed.seed)) {
          const m = membershipHash([]);
          const b = beacon ?? "";
          return finish(ctx, eventId, k, committed.seed, m, b, drawKey(committed.seed, m, b));
        }
      }
      return finish(ctx, eventId, k, seed, "", beacon ?? "", "");
    }
    const token = randomBytes(8).toString("hex");
    if ((await redis.set(lockKey, token, "PX", LOCK_MS, "NX")) !== "OK") return { ok: false, reason: "drawing" };
    try {
      // The seed: from DynamoDB where it is committed (Redis has none before the draw), else
      // from Redis (a room without a committer).
      const committed = ctx.lottery ? await ctx.lottery.read(eventId) : null;
      const theSeed = committed?.seed ?? seed;
      if (!/^[0-9a-f]{64}$/.test(theSeed)) throw new ReplyShapeError(`draw of ${eventId}: no committed seed`);
      const fanIds = new Set<string>();
      let cursor = "0";
      do {
        const [next, flat] = await redis.zscan(k.pre, cursor, "COUNT", SCAN_COUNT);
        for (let i = 0; i < flat.length; i += 2) fanIds.add(String(flat[i]));
        cursor = next;
      } while (cursor !== "0");
      if (fanIds.size !== Number(preCount)) {
        throw new ReplyShapeError(`draw of ${eventId}: ${fanIds.size} fans in the pre-queue, ${preCount} at the close`);
      }
      const fanOf = new Map<string, string>();
      for (const fanId of fanIds) fanOf.set(entryOf(fanId), fanId);
      const m = membershipHash(fanOf.keys());
      const b = beacon ?? "";
      const key = drawKey(theSeed, m, b);
      const order = drawOrder(key, fanOf.keys());
      for (let start = 0; start < order.length; start += WRITE_CHUNK) {
        const pipeline = redis.pipeline();
        const args: (string | number)[] = [];
        for (let i = start; i < Math.min(order.length, start + WRITE_CHUNK); i++) {
          args.push(i + 1, fanOf.get(order[i]!)!);
        }
        pipeline.zadd(k.pre, "XX", ...args);
        await pipeline.exec();
      }
      const result = await finish(ctx, eventId, k, theSeed, m, b, key);
      if (result.ok && result.changed) {
        ctx.log?.info({ eventId, size: order.length, membershipHash: m, beacon: b }, "pre-queue drawn");
      }
      return result;
    } finally {
      if ((await redis.get(lockKey)) === token) await redis.del(lockKey);
    }
  });
}

async function finish(
  ctx: RoomContext,
  eventId: string,
  k: NonNullable<ReturnType<typeof keysFor>>,
  seed: string,
  m: string,
  beacon: string,
  key: string,
): Promise<DrawResult> {
  const { reply, outcome } = await ctx.script("lotteryDrawn", lineKeys(k), [seed, m, beacon, key]);
  if (outcome === "not_found") return notFound;
  if (outcome === "not_closed") return { ok: false, reason: "not_closed" };
  if (outcome) throw new ReplyShapeError(`lotteryDrawn of ${eventId}: ${outcome}`);
  const f = new Fields(reply);
  return { ok: true, changed: f.flag("changed"), info: infoFrom(f) };
}
