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
import { roundAt } from "../lottery/drand.js";
import type { DrawRecord } from "../lottery/store.js";
import { DRAW_GRACE_MS } from "./advice.js";
import { keysFor, notFound, type RoomContext } from "./context.js";
import type { FanBeats } from "./fan-shards.js";
import { lineKeys } from "./keys.js";
import { Fields, infoFrom, ReplyShapeError } from "./replies.js";
import type { NotFound, Unavailable, WaitingRoomInfo } from "./types.js";

const SCAN_COUNT = 1_000;
const WRITE_CHUNK = 1_000;
// How long the draw of a room whose records live on the fan shards waits after the close (advice.ts).
export { DRAW_GRACE_MS };
/** Longer than a draw of a million fans takes; a dead holder's lock is free after it. */
const LOCK_MS = 120_000;

export type DrawResult =
  | { ok: true; changed: boolean; info: WaitingRoomInfo }
  /**
   * The event names a drand chain and its round's beacon has not been recorded yet: the draw waits
   * for it, however long (there is no draw without it: that would be a second order to choose from).
   */
  | { ok: false; reason: "not_closed" | "drawing" | "awaiting_beacon" }
  | NotFound
  | Unavailable;

/** How many times a draw computes again when a beacon value came in between its read and its seal. */
const SEAL_ATTEMPTS = 3;

export async function drawPreQueue(ctx: RoomContext, eventId: string): Promise<DrawResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  const lockKey = `${k.room}:draw-lock`;
  return ctx.guarded("draw", eventId, async (): Promise<DrawResult> => {
    const { redis } = ctx;
    const [openedAt, drawn, preCount, seed, beacon, claims] = await redis.hmget(
      k.room,
      "openedAt",
      "drawn",
      "preCount",
      "seed",
      "beacon",
      "claims",
    );
    const onShards = Number(claims) === 2;
    if (seed === null || seed === undefined) return notFound;
    if (!openedAt || openedAt === "0") return { ok: false, reason: "not_closed" };
    if (drawn === "1") {
      // An empty pre-queue was marked drawn at the close; with the seed kept out of Redis it is
      // revealed now, with the membership hash of no entries (the recipe holds for size 0).
      if (seed === "" && ctx.lottery && Number(preCount ?? 0) === 0) {
        const inputs = await drawInputs(ctx, eventId, Number(openedAt));
        if (inputs.ok) {
          const m = membershipHash([]);
          const sealed = await sealDraw(ctx, eventId, Number(openedAt), inputs, m, (b) => ({
            key: drawKey(inputs.seed, m, b),
            order: [],
          }));
          if (!sealed.ok) return sealed;
          return finish(ctx, eventId, k, inputs.seed, m, sealed.beacon, drawKey(inputs.seed, m, sealed.beacon));
        }
        if (inputs.reason !== "no_seed") return { ok: false, reason: inputs.reason };
      }
      return finish(ctx, eventId, k, seed, "", beacon ?? "", "");
    }
    // The seed, the beacon and any sealed record: from DynamoDB where they are committed (Redis
    // has no seed before the draw), else from Redis (a room without a committer).
    const inputs = ctx.lottery
      ? await drawInputs(ctx, eventId, Number(openedAt))
      : ({ ok: true, seed, beacon: beacon ?? "" } as const);
    if (!inputs.ok) {
      if (inputs.reason === "no_seed") throw new ReplyShapeError(`draw of ${eventId}: no committed seed`);
      return { ok: false, reason: inputs.reason };
    }
    // Records on the shards: the joins given arrival numbers before the close land first.
    if (onShards && Date.now() < Number(openedAt) + DRAW_GRACE_MS) return { ok: false, reason: "drawing" };
    const token = randomBytes(8).toString("hex");
    if ((await redis.set(lockKey, token, "PX", LOCK_MS, "NX")) !== "OK") return { ok: false, reason: "drawing" };
    try {
      const shards = onShards ? (await ctx.fanLine.roomOf(eventId)).beats : null;
      if (onShards && !shards) throw new ReplyShapeError(`draw of ${eventId}: records on shards, no shards`);
      const fanIds = shards ? await shardMembers(shards, eventId) : new Set<string>();
      let cursor = "0";
      if (!shards) {
        do {
          const [next, flat] = await redis.zscan(k.pre, cursor, "COUNT", SCAN_COUNT);
          for (let i = 0; i < flat.length; i += 2) fanIds.add(String(flat[i]));
          cursor = next;
        } while (cursor !== "0");
      }
      // Records on the shards: arrival numbers given and never written (a gateway lost mid-join)
      // are nobody's, so the members may be fewer (lottery-drawn-8.lua vacates their places).
      if (shards ? fanIds.size > Number(preCount) : fanIds.size !== Number(preCount)) {
        throw new ReplyShapeError(`draw of ${eventId}: ${fanIds.size} fans in the pre-queue, ${preCount} at the close`);
      }
      const fanOf = new Map<string, string>();
      for (const fanId of fanIds) fanOf.set(entryOf(fanId), fanId);
      const m = membershipHash(fanOf.keys());
      // The order for a beacon, computed once per beacon (a million fans take seconds).
      let built: { beacon: string; key: string; order: string[] } | undefined;
      const build = (b: string) => {
        if (built?.beacon !== b) {
          const key = drawKey(inputs.seed, m, b);
          built = { beacon: b, key, order: drawOrder(key, fanOf.keys()) };
        }
        return built;
      };
      const sealed = await sealDraw(ctx, eventId, Number(openedAt), inputs, m, build);
      if (!sealed.ok) return sealed;
      const { key, order } = build(sealed.beacon);
      if (sealed.m !== m) {
        // A room recreated after a wipe, whose membership is not the one drawn and sealed: its own
        // order stands in Redis, the sealed one is what is published (snapshot.ts).
        ctx.log?.warn({ eventId, sealed: sealed.m, membershipHash: m }, "the pre-queue differs from the sealed draw");
      }
      if (shards)
        await placeOnShards(
          shards,
          eventId,
          order.map((entry) => fanOf.get(entry)!),
        );
      for (let start = 0; !shards && start < order.length; start += WRITE_CHUNK) {
        const pipeline = redis.pipeline();
        const args: (string | number)[] = [];
        for (let i = start; i < Math.min(order.length, start + WRITE_CHUNK); i++) {
          args.push(i + 1, fanOf.get(order[i]!)!);
        }
        pipeline.zadd(k.pre, "XX", ...args);
        await pipeline.exec();
      }
      const result = await finish(
        ctx,
        eventId,
        k,
        inputs.seed,
        m,
        sealed.beacon,
        key,
        shards ? order.length : undefined,
      );
      // This process's cached view still shows the draw pending (its pre-queued fans would be told
      // their arrival numbers for a refresh): read again before answering from it.
      if (result.ok) ctx.views?.invalidate(eventId);
      if (result.ok && result.changed) {
        ctx.log?.info({ eventId, size: order.length, membershipHash: m, beacon: sealed.beacon }, "pre-queue drawn");
      }
      return result;
    } finally {
      if ((await redis.get(lockKey)) === token) await redis.del(lockKey);
    }
  });
}

type DrawInputs =
  | { ok: true; seed: string; beacon: string; round?: number; sealed?: DrawRecord }
  | { ok: false; reason: "awaiting_beacon" | "no_seed" };

/**
 * What the draw takes from DynamoDB: the seed, the beacon, a sealed record. With a drand chain the
 * beacon is the randomness of the round first published at or after the close, recorded (and
 * verified) by recordBeacon; until it is, the draw waits. Without a chain there is no beacon.
 */
async function drawInputs(ctx: RoomContext, eventId: string, closedAt: number): Promise<DrawInputs> {
  const committed = await ctx.lottery!.read(eventId);
  if (!committed || !/^[0-9a-f]{64}$/.test(committed.seed)) return { ok: false, reason: "no_seed" };
  if (committed.draw) return { ok: true, seed: committed.seed, beacon: committed.draw.beacon, sealed: committed.draw };
  const chain = committed.drandChain;
  if (chain) {
    const round = roundAt(chain, closedAt);
    if (committed.beacon === undefined || committed.beaconRound?.round !== round)
      return { ok: false, reason: "awaiting_beacon" };
    return { ok: true, seed: committed.seed, beacon: committed.beacon, round };
  }
  return { ok: true, seed: committed.seed, beacon: committed.beacon ?? "" };
}

/**
 * Seals the draw in DynamoDB (the order's pages, then the record), building the key and order
 * again when a beacon value came in between the read and the seal. Returns the membership hash
 * and beacon that stand: the sealed record's when a draw was sealed already (a rerun after a
 * crash finds its own; a room recreated after a wipe finds the original).
 */
async function sealDraw(
  ctx: RoomContext,
  eventId: string,
  closedAt: number,
  first: Extract<DrawInputs, { ok: true }>,
  m: string,
  build: (beacon: string) => { key: string; order: readonly string[] },
): Promise<{ ok: true; m: string; beacon: string } | { ok: false; reason: "awaiting_beacon" }> {
  let inputs: DrawInputs = first;
  for (let attempt = 0; attempt < SEAL_ATTEMPTS; attempt++) {
    if (!inputs.ok) {
      if (inputs.reason === "no_seed") throw new ReplyShapeError(`draw of ${eventId}: the committed seed vanished`);
      return { ok: false, reason: inputs.reason };
    }
    if (inputs.sealed) return { ok: true, m: inputs.sealed.membershipHash, beacon: inputs.sealed.beacon };
    if (!ctx.lottery) return { ok: true, m, beacon: inputs.beacon };
    const { key, order } = build(inputs.beacon);
    const record = {
      membershipHash: m,
      size: order.length,
      beacon: inputs.beacon,
      drawKey: key,
      closedAt: new Date(closedAt).toISOString(),
      ...(inputs.round === undefined ? {} : { round: inputs.round }),
    };
    const out = await ctx.lottery.seal(eventId, record, order);
    if (out.ok) return { ok: true, m, beacon: inputs.beacon };
    if (out.reason === "other_draw") return { ok: true, m: out.record.membershipHash, beacon: out.record.beacon };
    inputs = await drawInputs(ctx, eventId, closedAt);
  }
  throw new ReplyShapeError(`draw of ${eventId}: the beacon changed ${SEAL_ATTEMPTS} times during the seal`);
}

async function finish(
  ctx: RoomContext,
  eventId: string,
  k: NonNullable<ReturnType<typeof keysFor>>,
  seed: string,
  m: string,
  beacon: string,
  key: string,
  members?: number,
): Promise<DrawResult> {
  const { reply, outcome } = await ctx.script("lotteryDrawn", lineKeys(k), [
    seed,
    m,
    beacon,
    key,
    ...(members === undefined ? [] : [members]),
  ]);
  if (outcome === "not_found") return notFound;
  if (outcome === "not_closed") return { ok: false, reason: "not_closed" };
  if (outcome) throw new ReplyShapeError(`lotteryDrawn of ${eventId}: ${outcome}`);
  const f = new Fields(reply);
  return { ok: true, changed: f.flag("changed"), info: infoFrom(f) };
}

/**
 * Records on the shards (step 6 of docs/redis-cluster.md "Steps 2 and 3, call by call"): every
 * shard's pre-queue frozen, then its members read page by page. Frozen first, so no pre-queue join
 * lands on a shard after its members were read (a straggler is refused there and placed after the
 * pre-queue), and the membership hashed is the one placed.
 */
async function shardMembers(shards: FanBeats, eventId: string): Promise<Set<string>> {
  const all = Array.from({ length: shards.shards }, (_, shard) => shard);
  await Promise.all(all.map((shard) => shards.records.freeze(eventId, shard)));
  const fanIds = new Set<string>();
  await Promise.all(
    all.map(async (shard) => {
      for (let from = 0; ; from += SCAN_COUNT) {
        const page = await shards.records.members(eventId, shard, from, SCAN_COUNT);
        for (const fanId of page) fanIds.add(fanId);
        if (page.length < SCAN_COUNT) return;
      }
    }),
  );
  return fanIds;
}

/** Each fan's drawn place (its index in `order`, from 1) written into its shard's pre-queue, in chunks. */
async function placeOnShards(shards: FanBeats, eventId: string, order: readonly string[]): Promise<void> {
  const byShard = new Map<number, [string, number][]>();
  for (const [i, fanId] of order.entries()) {
    const shard = shards.shardOf(fanId);
    const list = byShard.get(shard);
    if (list) list.push([fanId, i + 1]);
    else byShard.set(shard, [[fanId, i + 1]]);
  }
  await Promise.all(
    [...byShard].map(async ([shard, places]) => {
      for (let start = 0; start < places.length; start += WRITE_CHUNK) {
        await shards.records.place(eventId, shard, places.slice(start, start + WRITE_CHUNK));
      }
    }),
  );
}
