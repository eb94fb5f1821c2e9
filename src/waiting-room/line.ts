/**
 * The fan's side of the line: taking a place (join-batch-n.lua, batched per event by join-batch.ts;
 * join-9.lua for what a batch cannot place) and polling it (status-10.lua). Each is one Redis round
 * trip, its rate limits taken inside the same script; the status poll is the hot path of an
 * on-sale, so nothing here adds a call to it.
 */
import { DRAW_GRACE_MS } from "./advice.js";
import { scriptOutcome } from "./codes.js";
import { keysFor, notFound, type RestoringContext, type RoomContext } from "./context.js";
import { type AbandonClock, abandonClockFrom, type FanBeats } from "./fan-shards.js";
import type { BatchedJoin } from "./join-batch.js";
import type { ShardJoinRoom } from "./shard-joins.js";
import { isEventId, isFanId, limitKey, lineKeys, lineKeysWithClaims, type WaitingRoomKeys } from "./keys.js";
import { MAX_POW_BITS } from "./proof-of-work.js";
import { Fields, limitedFrom, ReplyShapeError, refusedFrom } from "./replies.js";
import type {
  FanPlace,
  JoinCredentials,
  JoinResult,
  LineLimit,
  NotFound,
  RateLimited,
  StatusLimits,
  StatusResult,
  Unavailable,
} from "./types.js";

export interface StatusOptions {
  rejoin?: { epoch: string | undefined };
  limits?: StatusLimits;
}

/** KEYS and ARGV of one limit: an untouched key and rate 0 when there is none. */
function limitArgs(eventId: string, name: string, limit: LineLimit | undefined, subject = limit?.subject ?? "") {
  return {
    key: limitKey(eventId, name, subject),
    args: limit && limit.perSecond > 0 ? [limit.perSecond, limit.burst] : [0, 0],
  };
}

async function statusOnce(
  ctx: RestoringContext,
  k: WaitingRoomKeys,
  eventId: string,
  fanId: string,
  limits: StatusLimits = {},
): Promise<StatusResult> {
  const ip = limitArgs(eventId, "ip:status", limits.ip);
  const fan = limitArgs(eventId, "fan:status", limits.fan, fanId);
  return ctx.guarded("status", eventId, async () => {
    // A room with fan shards: the poll's beat first, on the fan's shard, which says how old the
    // one before it was, so the line can tell a place that lapsed meanwhile (status-10.lua ARGV[6]).
    const room = await ctx.fanLine.roomOf(eventId);
    if (room.recordsOnShards && room.beats) {
      const on = { epoch: room.epoch, beats: room.beats };
      return statusOnShards(ctx, k, eventId, fanId, on, [ip.key, fan.key], [...ip.args, ...fan.args]);
    }
    const polled = room.beats ? await room.beats.poll(eventId, fanId) : null;
    const { reply, outcome } = await ctx.script(
      "status",
      [...lineKeys(k), ip.key, fan.key],
      [fanId, ...ip.args, ...fan.args, polled?.age ?? ""],
    );
    const limited = limitedFrom(reply);
    if (limited) return limited;
    if (outcome === "not_found") {
      if (polled && room.beats) {
        // The room this process knew is gone: read again next time, and take the beat back (its
        // shard's keys went with the room; nobody would ever sweep it).
        ctx.fanLine.forget(eventId);
        await room.beats.unwrite(eventId, [{ fanId, beat: polled.beat }]).catch(() => undefined);
      }
      return notFound;
    }
    if (outcome === "not_joined") return { ok: false as const, reason: outcome };
    if (outcome) throw new ReplyShapeError(`status: unexpected ${outcome}`);
    const f = new Fields(reply);
    const place = ctx.placeFrom(f, eventId, fanId);
    ctx.views?.learn(eventId, fanId, place, f.str("epoch"));
    const epoch = f.str("epoch");
    if (epoch !== room.epoch || f.num("fanShards") !== room.shards) ctx.fanLine.forget(eventId);
    else if (f.flag("sweep")) ctx.fanLine.sweep(eventId, room);
    return { ok: true as const, fanId, place };
  });
}

/** A room whose records live on the fan shards: its draw waits DRAW_GRACE_MS after the close. */
const ON_SHARDS = { drawGraceMs: DRAW_GRACE_MS };

/**
 * A poll Redis answers in a room whose records live on the fan shards (docs/redis-cluster.md
 * "Steps 2 and 3, call by call", step 2): the record on the fan's shard (fan-records-5.lua 'poll':
 * its beat written, a lapsed place given up), judged by the room's abandon clock (this process's
 * fresh view of the room, else read from the event's slot), and the event's slot's answer from
 * that record (status-shard-11.lua: the claim of a passed place).
 *
 * A fan this process knows as waiting at a place, and has seen within the keep time, is asked of
 * both at once: the slot answers the record `w|place`, and that answer stands when the shard's
 * record says that place; otherwise (the fan left it: a session ended and a new place, a revocation)
 * the slot is asked again with the record as it is. So a poll that claims nothing is one round
 * trip, as by name. Only a place the fan holds is claimed: an offer is live only at a place whose
 * fan neither lapsed (seen within the keep time) nor left it (a left place is claimed or barred).
 *
 * The record the answer settles is written back to the shard only while it is still the one read
 * (fan-records-5.lua 'cas'). A claim's (`a`, the session) is written before the access token goes
 * out, and a record changed meanwhile (a revocation, a second tab's poll) is read again: the claim
 * is the place's, so a poll tried again gets the same session, and a revoked record keeps no token.
 * So the poll that admits a fan is two round trips. Any other write back (a place lost, a session
 * that ended) is sent and not waited for: the event's slot decided, the record caches it, and one
 * lost with its gateway is settled the same way by the fan's next poll. Each round trip costs a
 * turn of the gateway's event loop, which is busiest when fans are being admitted.
 */
async function statusOnShards(
  ctx: RestoringContext,
  k: WaitingRoomKeys,
  eventId: string,
  fanId: string,
  room: { epoch: string; beats: FanBeats },
  limitKeys: readonly string[],
  limitArgs: readonly (string | number)[],
  /** The fan's place as its join just found it on the shard (else the view's, when it knows the fan). */
  placed?: number,
): Promise<StatusResult> {
  const clock = ctx.views?.abandonClock(eventId, room.epoch) ?? (await readAbandonClock(ctx, k));
  if (!clock) return notFound;
  const keys = [...lineKeysWithClaims(k), ...limitKeys];
  const slot = (record: string, limits: readonly (string | number)[]) =>
    ctx.script("statusShard", keys, [fanId, ...limits, record]);
  // the limits are taken by the first call on the slot only
  let limits = limitArgs;
  let known = placed ?? ctx.views?.knownPlace(eventId, fanId, room.epoch) ?? null;
  for (let attempt = 0; attempt < RECORD_TRIES; attempt++) {
    const [polled, first] = await Promise.all([
      room.beats.records.poll(eventId, fanId, clock),
      known === null ? null : slot(`w|${known}|0||0|0`, limits),
    ]);
    if (first) {
      limits = NO_LIMITS;
      const limited = limitedFrom(first.reply);
      if (limited) return limited;
      if (first.outcome === "not_found") return notFound;
    }
    if (!polled) return { ok: false as const, reason: "not_joined" as const };
    const [status, place, arrival] = polled.record.split("|");
    // the slot's answer about the known place stands when the record holds that place
    const kept = first && status === "w" && Number(place) === known;
    if (first && !kept)
      ctx.log?.debug({ eventId, fanId, known, record: polled.record }, "fan's place moved: asked again");
    const { reply, outcome } = kept ? first : await slot(polled.record, limits);
    limits = NO_LIMITS;
    known = null;
    const limited = limitedFrom(reply);
    if (limited) return limited;
    if (outcome === "not_found") return notFound;
    if (outcome === "not_joined") return { ok: false as const, reason: outcome };
    if (outcome) throw new ReplyShapeError(`status: unexpected ${outcome}`);
    const f = new Fields(reply);
    let record = f.str("record");
    // (answered from `w|place|0`: the record keeps its own arrival number)
    if (kept && record !== "") {
      const fields = record.split("|");
      fields[2] = arrival ?? "0";
      record = fields.join("|");
    }
    if (record.startsWith("a|")) {
      // A claim: on the record before the access token goes out, so that what the record says
      // (an operator's revocation reads it) never lags a token; changed meanwhile, read again.
      if (!(await room.beats.records.cas(eventId, fanId, polled.record, record))) continue;
    } else if (record !== "") writeBack(ctx, room.beats, eventId, fanId, polled.record, record);
    // (the draw of such a room waits DRAW_GRACE_MS after the close: the advice counts it)
    const answered = ctx.placeFrom(f, eventId, fanId, ON_SHARDS);
    ctx.views?.learn(eventId, fanId, answered, f.str("epoch"));
    if (f.flag("sweep")) ctx.fanLine.sweep(eventId, await ctx.fanLine.roomOf(eventId));
    return { ok: true as const, fanId, place: answered };
  }
  throw new ReplyShapeError(`status of ${eventId}: the fan's record kept changing`);
}

/** Tries of a poll whose claim found the fan's record changed on its shard before its write. */
const RECORD_TRIES = 3;
const NO_LIMITS = [0, 0, 0, 0];

/**
 * A record that is no claim (a place lost, a session that ended) written back without the fan's
 * answer waiting for it: the event's slot decided, the record only caches it, and a record left
 * as it was is settled the same way by the fan's next poll.
 */
function writeBack(
  ctx: RestoringContext,
  beats: FanBeats,
  eventId: string,
  fanId: string,
  old: string,
  record: string,
) {
  beats.records.cas(eventId, fanId, old, record).then(
    (written) => {
      if (!written)
        ctx.log?.debug({ eventId, fanId }, "fan record changed before the poll's write back: left as it is");
    },
    (err: unknown) =>
      ctx.log?.warn(
        { eventId, fanId, err: (err as Error).message },
        "fan record not written back: the next poll settles it",
      ),
  );
}

/** The room's abandon clock as the event's slot holds it now; null when there is no room. */
async function readAbandonClock(ctx: RestoringContext, k: WaitingRoomKeys): Promise<AbandonClock | null> {
  const [abandonSeconds, openedAt, drawnAt, drawn] = await ctx.redis.hmget(
    k.room,
    "abandonSeconds",
    "openedAt",
    "drawnAt",
    "drawn",
  );
  if (abandonSeconds === null) return null;
  return abandonClockFrom({
    abandonSeconds: Number(abandonSeconds),
    openedAt: Number(openedAt),
    drawn: Number(drawn) !== 0,
    drawnAt: Number(drawnAt),
  });
}

async function joinOnce(
  ctx: RestoringContext,
  k: WaitingRoomKeys,
  eventId: string,
  fanId: string,
  ipLimit?: LineLimit,
  credentials: JoinCredentials = {},
): Promise<JoinResult> {
  const ip = limitArgs(eventId, "ip:join", ipLimit);
  const proofBits = credentials.proofBits ?? 0;
  const invite = credentials.invite === true;
  return ctx.guarded("join", eventId, async () => {
    // The room as this process knows it, without a promise hop once read (the join is a hot path).
    const room = ctx.fanLine.knownRoom(eventId) ?? (await ctx.fanLine.roomOf(eventId));
    if (room.recordsOnShards && room.beats) {
      const request = { fanId, bucket: ip.key, limit: ip.args, proofBits, invite };
      const joined = await joinOnShards(ctx, k, eventId, shardJoinRoom(room, room.beats), request);
      if (joined !== RESHARD) return joined;
      // The room is not the one this process knew (created again, a restore after a Redis loss):
      // read again, sent again once (the range touched nothing).
      const fresh = await ctx.fanLine.roomOf(eventId);
      if (fresh.recordsOnShards && fresh.beats) {
        const again = await joinOnShards(ctx, k, eventId, shardJoinRoom(fresh, fresh.beats), request);
        if (again === RESHARD) throw new ReplyShapeError("join: the room's shards keep changing");
        return again;
      }
    }
    const keys = lineKeys(k);
    // A fan new to a line that is moving: placed in this process's next batch of the event's joins
    // (join-batch.ts, join-batch-n.lua), no tick. Anything else it hands to join-9.lua (the IP's
    // limit already taken: not again).
    const request = { fanId, bucket: ip.key, limit: ip.args, proofBits, invite };
    let reply = await ctx.joins.join(eventId, keys, request);
    if (Array.isArray(reply) && reply[0] === "reshard") {
      // The room is not the one this process knew (created again): read again, sent again.
      ctx.fanLine.forget(eventId);
      reply = await ctx.joins.join(eventId, keys, request);
      if (Array.isArray(reply) && reply[0] === "reshard")
        throw new ReplyShapeError("join: the room's shards keep changing");
    }
    let outcome = scriptOutcome(reply);
    if (Array.isArray(reply) && reply[0] === "join") {
      // A sharded room passes on how old the fan's previous beat was (join-batch-n.lua).
      const age = reply.length > 1 ? String(reply[1]) : "";
      ({ reply, outcome } = await ctx.script(
        "join",
        [...keys, ip.key],
        [fanId, 0, 0, proofBits, invite ? "1" : "0", age],
      ));
    }
    const limited = limitedFrom(reply);
    if (limited) return limited;
    const refused = refusedFrom(reply);
    if (refused) return refused;
    if (outcome === "not_found") return notFound;
    if (outcome === "closed" || outcome === "revoked") return { ok: false as const, reason: outcome };
    if (outcome) throw new ReplyShapeError(`join: unexpected ${outcome}`);
    // A fan placed by a batch: its fields over the batch's view (join-batch.ts fanReplies).
    const f = reply instanceof Fields ? reply : new Fields(reply);
    const epoch = f.str("epoch");
    const queueToken = ctx.tokens.signQueueToken({ fanId, eventId, epoch });
    let place: FanPlace;
    if (f.has("viewless")) {
      // Placed without the fan view (this process's view answers new places: join-batch-n.lua):
      // answered from that view as the fan's first poll would be. Should the view have gone stale
      // meanwhile, Redis answers, as for a poll.
      const cached = ctx.views?.placeOfNewFan(eventId, f.num("position"), epoch);
      if (cached) place = cached;
      else {
        const polled = await statusOnce(ctx, k, eventId, fanId);
        if (!polled.ok) {
          if (polled.reason === "not_found" || polled.reason === "unavailable") return polled;
          throw new ReplyShapeError(`join: a place just taken, then ${polled.reason}`);
        }
        return { ok: true as const, created: true, fanId, queueToken, place: polled.place, invites: f.flag("invites") };
      }
    } else place = ctx.placeFrom(f, eventId, fanId);
    ctx.views?.learn(eventId, fanId, place, epoch);
    return { ok: true as const, created: f.flag("created"), fanId, queueToken, place, invites: f.flag("invites") };
  });
}

/** A join the range refused because the room is not the one this process knew: join again. */
const RESHARD = Symbol("reshard");

function shardJoinRoom(room: { epoch: string; shards: number }, beats: FanBeats): ShardJoinRoom {
  return { epoch: room.epoch, shards: room.shards, beats };
}

/**
 * A join in a room whose records live on the fan shards (shard-joins.ts: a range on the event's
 * slot, the records on the shards). A new place is answered from this process's view of the line
 * when it can (as a batch's viewless reply); anything else (a repeat join, an admitted fan, no
 * view) by the fan's poll, which Redis answers from its record. A pre-queue join its frozen shard
 * refused (after the draw) joins again, at the back. RESHARD when the range found another room than
 * `room` (created again meanwhile): nothing was taken, the caller reads the room again.
 */
async function joinOnShards(
  ctx: RestoringContext,
  k: WaitingRoomKeys,
  eventId: string,
  room: ShardJoinRoom,
  request: BatchedJoin,
): Promise<JoinResult | typeof RESHARD> {
  const joinAgain = () => ctx.shardJoins.join(eventId, lineKeys(k), room, request);
  let outcome = await joinAgain();
  if (outcome.kind === "frozen") outcome = await joinAgain();
  // the join's own limit was taken; the polls that answer it take none
  const noLimits = [limitKey(eventId, "ip:status", ""), limitKey(eventId, "fan:status", request.fanId)];
  const poll = (placed?: number) =>
    statusOnShards(ctx, k, eventId, request.fanId, room, noLimits, [0, 0, 0, 0], placed);
  /**
   * A join the range refused before any record was read (closed, a proof or an invite missing): the
   * place the fan's record keeps, answered by its poll; a revoked fan refused so; null when the fan
   * has no record or its place ended (the refusal stands: no new place).
   */
  const keptPlace = async (): Promise<JoinResult | null> => {
    // the poll reads the record on its shard: none, `not_joined`
    const kept = await poll();
    if (!kept.ok) return kept.reason === "not_found" || kept.reason === "unavailable" ? kept : null;
    if (kept.place.status === "revoked") return { ok: false, reason: "revoked" };
    if (ENDED.has(kept.place.status)) return null;
    const queueToken = ctx.tokens.signQueueToken({ fanId: request.fanId, eventId, epoch: room.epoch });
    const invites = Number(await ctx.redis.hget(k.room, "invites")) === 1;
    return { ok: true, created: false, fanId: request.fanId, queueToken, place: kept.place, invites };
  };
  // An admitted fan's record: its poll settles it (a session that ended since is expired or
  // completed there), and a fan whose session ended takes a new place at the back, as join-9.lua
  // does in one call. One try: a fan admitted again in between keeps that session.
  let settled: StatusResult | null = null;
  if (outcome.kind === "admitted") {
    settled = await poll();
    if (settled.ok && ENDED.has(settled.place.status)) {
      outcome = await joinAgain();
      settled = null;
    }
  }
  switch (outcome.kind) {
    case "limited": {
      const limited = limitedFrom(outcome.reply);
      if (!limited) throw new ReplyShapeError("join: a limit without its refusal");
      return limited;
    }
    case "refused": {
      // A fan in line or admitted keeps its place without the proof or the invite a new place asks
      // (the range refuses before any record is read), as in today's rooms; the routes then ask an
      // invite line's invite of a place given back (`invites`).
      const kept = await keptPlace();
      if (kept) return kept;
      if (outcome.reason === "invite") return { ok: false, reason: "invite_required" };
      const powBits = Number(await ctx.redis.hget(k.room, "powBits"));
      return { ok: false, reason: "pow_required", powBits };
    }
    case "not_found":
      return notFound;
    case "closed":
      // A closed room keeps the places it gave and gives no new one.
      return (await keptPlace()) ?? { ok: false, reason: "closed" };
    case "revoked":
      return { ok: false, reason: outcome.kind };
    case "reshard":
      ctx.fanLine.forget(eventId);
      return RESHARD;
    case "frozen":
      ctx.fanLine.forget(eventId);
      throw new ReplyShapeError(`join of ${eventId}: the room changed under the join (${outcome.kind})`);
  }
  const queueToken = ctx.tokens.signQueueToken({ fanId: request.fanId, eventId, epoch: room.epoch });
  const created = outcome.kind === "placed" && outcome.created;
  if (outcome.kind === "placed" && outcome.created && !outcome.prequeue) {
    const cached = ctx.views?.placeOfNewFan(eventId, outcome.position, room.epoch);
    if (cached) {
      ctx.views?.learn(eventId, request.fanId, cached, room.epoch);
      return { ok: true, created, fanId: request.fanId, queueToken, place: cached, invites: false };
    }
  }
  // (a place in line the shard just answered: the event's slot is asked about it while the record is read)
  const placed = outcome.kind === "placed" && !outcome.prequeue ? outcome.position : undefined;
  const polled = settled ?? (await poll(placed));
  if (!polled.ok) {
    if (polled.reason === "not_found" || polled.reason === "unavailable") return polled;
    throw new ReplyShapeError(`join of ${eventId}: a place just taken, then ${polled.reason}`);
  }
  // A place given back (not made by this join) in a line for invited fans goes only with the
  // invite (the routes refuse it without): the room's setting, read for repeat joins only.
  const invites = !created && Number(await ctx.redis.hget(k.room, "invites")) === 1;
  return { ok: true, created, fanId: request.fanId, queueToken, place: polled.place, invites };
}

/** A fan's place that ended: its join takes a new place at the back. */
const ENDED: ReadonlySet<string> = new Set(["expired", "completed", "abandoned"]);

/** The poll answered from this process's view of the line, or null when Redis must answer. */
export function cachedStatus(
  ctx: RoomContext,
  eventId: string,
  fanId: string,
  limits: StatusLimits | undefined,
  lookedUp = false,
): { ok: true; fanId: string; place: FanPlace; cached: true } | RateLimited | null {
  const cached = ctx.views?.answer(eventId, fanId, limits, lookedUp);
  if (!cached) return null;
  return "ok" in cached ? cached : { ok: true, fanId, place: cached, cached: true };
}

export async function statusOf(
  ctx: RestoringContext,
  eventId: string,
  fanId: string,
  options: StatusOptions = {},
): Promise<StatusResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  if (!isFanId(fanId)) return { ok: false, reason: "not_joined" };
  // A fan whose turn has not come, known to this process: answered from its view of the line,
  // no Redis call (line-view.ts says when that is exact to within a refresh).
  const cached = cachedStatus(ctx, eventId, fanId, options.limits);
  if (cached) return cached;
  // A fan this process does not know (its polls go round several processes): looked up in the
  // view's next refresh, and answered from the view when found, before it asks Redis.
  if (ctx.views && (await ctx.views.lookup(eventId, fanId))) {
    const learned = cachedStatus(ctx, eventId, fanId, options.limits, true);
    if (learned) return learned;
  }
  // The limits are taken once per request: the call again after a restore does not take them.
  let limits = options.limits;
  const found = await ctx.withRestore(eventId, () => {
    const once = limits;
    limits = undefined;
    return statusOnce(ctx, k, eventId, fanId, once);
  });
  if (found.ok || found.reason !== "not_joined" || !options.rejoin) return found;
  // Unknown fan. In the epoch that issued the token that cannot happen (a place is never
  // forgotten), so the answer stands; from another epoch, Redis lost the line: a new place.
  const epoch = await ctx.guarded("status", eventId, async () => (await ctx.redis.hget(k.room, "epoch")) ?? "");
  if (typeof epoch !== "string") return epoch;
  if (epoch === (options.rejoin.epoch ?? "")) return found;
  // The token proves the fan joined the lost line, with whatever proof or invite it asked then.
  const joined = await joinOnce(ctx, k, eventId, fanId, undefined, { proofBits: MAX_POW_BITS, invite: true });
  if (!joined.ok) return joined.reason === "unavailable" ? joined : found;
  ctx.log?.info({ eventId, fanId, position: joined.place.position }, "fan from a lost line placed in the new line");
  return { ok: true, fanId, place: joined.place, replaced: { queueToken: joined.queueToken } };
}

export async function status(ctx: RestoringContext, eventId: string, queueToken: string): Promise<StatusResult> {
  if (!isEventId(eventId)) return notFound;
  const check = ctx.tokens.verifyQueueToken(queueToken, eventId);
  if (!check.ok) return { ok: false, reason: "token", token: check.reason };
  return statusOf(ctx, eventId, check.claims.fanId, { rejoin: { epoch: check.claims.epoch } });
}

export async function join(
  ctx: RestoringContext,
  eventId: string,
  fanId: string,
  options: { limits?: { ip?: LineLimit | undefined }; credentials?: JoinCredentials } = {},
): Promise<JoinResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  if (!isFanId(fanId)) return { ok: false, reason: "invalid_fan" };
  // As for a poll: the limit is taken once, not again after a restore.
  let ipLimit = options.limits?.ip;
  return ctx.withRestore(eventId, () => {
    const once = ipLimit;
    ipLimit = undefined;
    return joinOnce(ctx, k, eventId, fanId, once, options.credentials);
  });
}

/**
 * One place per invite identity: the first fan id to present the identity keeps it (HSETNX, one
 * round trip with the read back). Answers the fan id holding it, this one or another. A claim
 * whose join then fails stays with that fan id, who may retry; the hash goes with the room.
 */
export async function claimIdentity(
  ctx: RoomContext,
  eventId: string,
  identity: string,
  fanId: string,
): Promise<{ ok: true; holder: string; fresh: boolean } | NotFound | Unavailable> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return ctx.guarded("claimIdentity", eventId, async () => {
    const { records } = ctx;
    if (records) {
      // DynamoDB decides (a conditional write: the first fan id keeps the identity for good), and
      // Redis caches its answer: a repeat join costs one Redis read, only a first claim the write.
      // So a Redis that lost the map cannot give the identity a second place.
      const known = await ctx.redis.hget(k.identities, identity);
      if (known !== null) return { ok: true as const, holder: known, fresh: false };
      const claim = await records.claimIdentity(eventId, identity, fanId);
      await ctx.redis.hset(k.identities, identity, claim.holder);
      return { ok: true as const, ...claim };
    }
    const replies = await ctx.redis.multi().hsetnx(k.identities, identity, fanId).hget(k.identities, identity).exec();
    const holder = replies?.[1]?.[1];
    if (typeof holder !== "string") throw new ReplyShapeError("claimIdentity: no holder read back");
    return { ok: true as const, holder, fresh: replies?.[0]?.[1] === 1 };
  });
}

/**
 * Takes back an identity's claim that `fanId` made a moment ago (the fan id's place was there
 * before: not the invite's to give), in DynamoDB first, then in Redis's cache of it.
 */
export async function releaseIdentity(
  ctx: RoomContext,
  eventId: string,
  identity: string,
  fanId: string,
): Promise<{ ok: true } | NotFound | Unavailable> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return ctx.guarded("releaseIdentity", eventId, async () => {
    await ctx.records?.releaseIdentity(eventId, identity, fanId);
    if ((await ctx.redis.hget(k.identities, identity)) === fanId) await ctx.redis.hdel(k.identities, identity);
    return { ok: true as const };
  });
}
