/**
 * A status poll and a join take their rate limits inside the waiting room's own script, so each is
 * ONE Redis command however many limits are on, and the limits hold as before: 429 with
 * Retry-After at the same rates, a refused poll touches nothing of the line, and while Redis is
 * away the gateway counts the same limits in memory before it answers 503.
 *
 * These are the polls that ask Redis: the gateway here runs without its line cache, so every
 * poll does (with it, a poll of a fan whose turn has not come is answered by the gateway, its
 * limits counted in the gateway's memory: the last describe block).
 *
 * Commands are counted by the test's own redis-server (MONITOR), not by a stand-in.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { waitingRoomKeys } from "../../src/waiting-room/index.js";
import { killRedis } from "../support/redis-loss.js";
import { monitorRedis } from "../support/redis-monitor.js";
import { createTable, eventInput, type Gateway, metricTotal, putEvent, startGateway, uniqueId } from "./harness.js";

const PER_IP = 4;
const PER_FAN = 2;

let redis: SpawnedRedis;
let admin: Redis;
let gw: Gateway;
/** The same limits, with the line cache on (as in production). */
let cached: Gateway;
let tableName: string;

beforeAll(async () => {
  redis = await spawnRedis();
  admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  admin.on("error", () => {});
  tableName = await createTable();
  gw = await startGateway({
    tableName,
    redisUrl: redis.url,
    limits: { ratePerIp: PER_IP, ratePerFan: PER_FAN, trustProxy: true },
    lineCache: false,
  });
  cached = await startGateway({
    tableName,
    redisUrl: redis.url,
    limits: { ratePerIp: PER_IP, ratePerFan: PER_FAN, trustProxy: true },
  });
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await cached?.close();
  admin?.disconnect();
  await redis?.close();
});

let ipCounter = 0;
const freshIp = () => `10.9.${(++ipCounter >> 8) & 255}.${ipCounter & 255}`;

/** A room that admits nobody (rate 0): its fans stay waiting, so every poll writes the heartbeat. */
async function waitingEvent(): Promise<string> {
  const eventId = uniqueId("rt");
  const put = await putEvent(
    gw,
    eventId,
    eventInput({ waitingRoom: { admitPerSecond: 0, maxActive: 10, sessionSeconds: 600 } }),
  );
  expect(put.status).toBe(201);
  return eventId;
}

async function join(eventId: string, fanId: string, ip = freshIp()): Promise<Response> {
  return gw.request(`/v1/events/${eventId}/queue`, {
    method: "POST",
    json: { fanId },
    headers: { "x-forwarded-for": ip },
  });
}

async function joined(eventId: string, fanId: string): Promise<string> {
  const res = await join(eventId, fanId);
  expect(res.status).toBe(201);
  return ((await res.json()) as { queueToken: string }).queueToken;
}

const poll = (eventId: string, token: string, ip = freshIp()) =>
  gw.request(`/v1/events/${eventId}/queue/status`, { token, headers: { "x-forwarded-for": ip } });

/**
 * The commands clients sent to the test's Redis while `during` ran, by name, as Redis' MONITOR
 * saw them (the commands a script runs inside are its own, shown as from "lua", and left out).
 */
async function commandsSent(during: () => Promise<void>, fanId: string): Promise<Record<string, number>> {
  // A plain socket, not ioredis' monitor(): see test/support/redis-monitor.ts.
  const monitor = await monitorRedis(redis.url);
  const sent: Record<string, number> = {};
  monitor.on(({ args, source }) => {
    if (source === "lua") return;
    // Only the commands naming this fan: the two gateways' background work for the same event
    // (the admission tick, the line cache's read, each a first EVAL on its socket) shares this
    // Redis and may run in the same moment; none of it names a fan.
    if (!args.some((a) => a.includes(fanId))) return;
    // A script's call, by EVALSHA or as a Redis Function (FCALL), counts as `script`.
    const command = String(args[0]).toLowerCase();
    const name = /^(?:evalsha|eval|fcall)(?:_ro)?$/.test(command) ? "script" : command;
    sent[name] = (sent[name] ?? 0) + 1;
  });
  try {
    await during();
    // A marker through another client: once MONITOR relays it, everything sent before it was relayed.
    const marker = `rt-marker-${Math.random()}`;
    const seen = new Promise<void>((resolve) =>
      monitor.on(({ args }) => {
        if (args[1] === marker) resolve();
      }),
    );
    await admin.echo(marker);
    await seen;
    delete sent.echo;
    return sent;
  } finally {
    monitor.close();
  }
}

async function expectRateLimited(res: Response, limit: string): Promise<void> {
  expect(res.status).toBe(429);
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  const body = (await res.json()) as { error: { code: string; details?: { limit?: string } } };
  expect(body.error.code).toBe("rate_limited");
  expect(body.error.details?.limit).toBe(limit);
}

describe("one round trip", () => {
  it("a status poll with the per-IP and per-fan limits on is one script call, and so is a join", async () => {
    const eventId = await waitingEvent();
    const token = await joined(eventId, "rt_one");
    // The first call of each script loads it (FUNCTION LOAD, or EVAL after NOSCRIPT); count from a warm client.
    expect((await poll(eventId, token)).status).toBe(200);

    const pollSent = await commandsSent(async () => {
      expect((await poll(eventId, token)).status).toBe(200);
    }, "rt_one");
    // A room with fan shards (TEST_FAN_SHARDS, WAITING_ROOM_FAN_SHARDS) beats on the fan's shard
    // first (beats-1.lua): one more, on another slot.
    const beats = Number(process.env.TEST_FAN_SHARDS ?? 0) > 0 ? 1 : 0;
    expect(pollSent).toEqual({ script: 1 + beats });

    const joinSent = await commandsSent(async () => {
      expect((await join(eventId, "rt_two")).status).toBe(201);
    }, "rt_two");
    // A room whose records live on the fan shards (TEST_LINE_CLAIMS=shards) reserves the place on
    // the event's slot (a call naming no fan) and writes the record on the fan's shard; this
    // gateway has no line view to answer the new place from, so the fan's poll answers it (its
    // shard's call and the event slot's): three naming the fan.
    const onShards = process.env.TEST_LINE_CLAIMS === "shards" && beats === 1;
    expect(joinSent).toEqual({ script: onShards ? 3 : 1 + beats });
  });

  it("a malformed join to an event nobody created is one call, its address's bucket: the room is not read", async () => {
    const malformed = (eventId: string) =>
      gw.request(`/v1/events/${eventId}/queue`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": freshIp() },
        body: "{not json",
      });
    // The limiter's script is loaded by its first call (FUNCTION LOAD, or EVAL after NOSCRIPT): warm it.
    expect((await malformed(uniqueId("rtnone"))).status).toBe(400);
    const made = uniqueId("rtnone");
    const sent = await commandsSent(async () => {
      const answers = await Promise.all(Array.from({ length: 3 }, () => malformed(made)));
      expect(answers.map((r) => r.status)).toEqual([400, 400, 400]);
    }, made);
    expect(sent).toEqual({ script: 3 });
  });
});

describe("the limits, taken inside the scripts", () => {
  it("one fan polling from many addresses, 12 in flight: 429 past her bucket, another fan unaffected", async () => {
    const eventId = await waitingEvent();
    const [eve, frank] = await Promise.all([joined(eventId, "rt_eve"), joined(eventId, "rt_frank")]);
    const polls = await Promise.all(Array.from({ length: 12 }, () => poll(eventId, eve)));
    const statuses = polls.map((r) => r.status);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    // A burst of 2 x PER_FAN, plus what refills while the 12 run.
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(PER_FAN * 2);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(PER_FAN * 2 + 2);
    await expectRateLimited(polls.find((r) => r.status === 429)!, "fan:status");
    expect((await poll(eventId, frank)).status).toBe(200);
  });

  it("one address polling for many fans, 20 in flight: 429 past its bucket; other addresses unaffected", async () => {
    const eventId = await waitingEvent();
    const tokens = await Promise.all(Array.from({ length: 20 }, (_, i) => joined(eventId, `rt_nat_${i}`)));
    const nat = freshIp();
    const polls = await Promise.all(tokens.map((t) => poll(eventId, t, nat)));
    const statuses = polls.map((r) => r.status);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(PER_IP * 2);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(PER_IP * 2 + 2);
    await expectRateLimited(polls.find((r) => r.status === 429)!, "ip:status");
    expect((await poll(eventId, tokens[0]!)).status).toBe(200);
  });

  it("a refused poll writes no heartbeat and takes nothing from the fan's bucket when the IP's refused it", async () => {
    const eventId = await waitingEvent();
    const token = await joined(eventId, "rt_quiet");
    const seenKey = waitingRoomKeys(eventId).seen;
    const ip = freshIp();
    // Empty the fan's bucket (burst 2 x PER_FAN), then one more: refused.
    for (let i = 0; i < PER_FAN * 2; i++) expect((await poll(eventId, token)).status).toBe(200);
    const seenBefore = await admin.zscore(seenKey, "rt_quiet");
    const refused = await poll(eventId, token, ip);
    await expectRateLimited(refused, "fan:status");
    expect(await admin.zscore(seenKey, "rt_quiet")).toBe(seenBefore);

    // A refusal by the IP's bucket leaves the fan's bucket as it was: empty one address's bucket
    // with other fans' polls, then a fan polls from it (refused), then from elsewhere, a full burst.
    const busy = freshIp();
    const others = await Promise.all(Array.from({ length: PER_IP * 2 }, (_, i) => joined(eventId, `rt_o_${i}`)));
    for (const t of others) expect((await poll(eventId, t, busy)).status).toBe(200);
    const fresh = await joined(eventId, "rt_fresh");
    for (let i = 0; i < 3; i++) await expectRateLimited(await poll(eventId, fresh, busy), "ip:status");
    const after = await Promise.all(Array.from({ length: PER_FAN * 2 }, () => poll(eventId, fresh)));
    expect(after.map((r) => r.status)).toEqual(Array.from({ length: PER_FAN * 2 }, () => 200));
  });

  it("joins from one address, well-formed or not, share one bucket per event: 429 past it, another event's is its own", async () => {
    const eventId = await waitingEvent();
    const other = await waitingEvent();
    const ip = freshIp();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => join(eventId, `rt_j_${i}`, ip)));
    const created = answers.filter((r) => r.status === 201).length;
    expect(answers.filter((r) => r.status !== 201 && r.status !== 429)).toEqual([]);
    expect(created).toBeGreaterThanOrEqual(PER_IP * 2);
    expect(created).toBeLessThanOrEqual(PER_IP * 2 + 2);
    await expectRateLimited(answers.find((r) => r.status === 429)!, "ip:join");
    // A malformed body from the same address meets the same, empty bucket: 429, not 400.
    const malformed = await gw.request(`/v1/events/${eventId}/queue`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": ip },
      body: "{not json",
    });
    await expectRateLimited(malformed, "ip:join");
    expect((await join(other, "rt_j_elsewhere", ip)).status).toBe(201);
  });
});

describe("with the line cache", () => {
  it("a poll of a fan far back is answered from the cache; its limits are counted by the gateway: 429 past them", async () => {
    const eventId = await waitingEvent();
    // Ten fans ahead: the last one's turn is not near (the room admits nobody).
    for (let i = 0; i < 10; i++) await joined(eventId, `rt_c_${i}`);
    const join = await cached.request(`/v1/events/${eventId}/queue`, {
      method: "POST",
      json: { fanId: "rt_far" },
      headers: { "x-forwarded-for": freshIp() },
    });
    const token = ((await join.json()) as { queueToken: string }).queueToken;
    const pollCached = (ip = freshIp()) =>
      cached.request(`/v1/events/${eventId}/queue/status`, { token, headers: { "x-forwarded-for": ip } });
    // Until the gateway has read its view of the line, Redis answers (and its bucket counts).
    const fromCache = () => metricTotal(cached, "gateway_queue_polls_total", { answered: "cache" });
    const deadline = Date.now() + 5_000;
    for (let before = await fromCache(); ; ) {
      expect((await pollCached()).status).toBe(200);
      if ((await fromCache()) > before || Date.now() > deadline) break;
      before = await fromCache();
      await new Promise((resolve) => setTimeout(resolve, 1_000 / PER_FAN));
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000 / PER_FAN));
    // One more poll: answered from the cache, not by the status script (that no command goes to
    // Redis for such a poll is counted command by command in test/waiting-room/line-cache.test.ts).
    const fromRedis = () => metricTotal(cached, "gateway_queue_polls_total", { answered: "redis" });
    const [cacheBefore, redisBefore] = [await fromCache(), await fromRedis()];
    expect((await pollCached()).status).toBe(200);
    expect([(await fromCache()) - cacheBefore, (await fromRedis()) - redisBefore]).toEqual([1, 0]);
    // The fan's bucket, in the gateway's memory: 12 in flight, a burst of 2 x PER_FAN answered.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const polls = await Promise.all(Array.from({ length: 12 }, () => pollCached()));
    const statuses = polls.map((r) => r.status);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(PER_FAN * 2);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(PER_FAN * 2 + 2);
    await expectRateLimited(polls.find((r) => r.status === 429)!, "fan:status");
  });
});

describe("a poll on a gateway that never answered the fan (polls spread by a balancer)", () => {
  it("is looked up by the next view refresh and answered from the view; the scrape counts the lookup", async () => {
    const eventId = await waitingEvent();
    for (let i = 0; i < 5; i++) await joined(eventId, `rt_l_${i}`);
    // The cached gateway learns the event's line through a fan of its own (its first polls go to Redis).
    const own = await cached.request(`/v1/events/${eventId}/queue`, {
      method: "POST",
      json: { fanId: "rt_l_own" },
      headers: { "x-forwarded-for": freshIp() },
    });
    const ownToken = ((await own.json()) as { queueToken: string }).queueToken;
    const fromCache = () => metricTotal(cached, "gateway_queue_polls_total", { answered: "cache" });
    const deadline = Date.now() + 5_000;
    for (let before = await fromCache(); Date.now() < deadline; before = await fromCache()) {
      const res = await cached.request(`/v1/events/${eventId}/queue/status`, {
        token: ownToken,
        headers: { "x-forwarded-for": freshIp() },
      });
      expect(res.status).toBe(200);
      if ((await fromCache()) > before) break;
      await new Promise((resolve) => setTimeout(resolve, 1_000 / PER_FAN));
    }
    // A fan who joined through the other gateway polls this one for the first time.
    const token = await joined(eventId, "rt_l_stranger");
    const counts = async () => ({
      cache: await fromCache(),
      redis: await metricTotal(cached, "gateway_queue_polls_total", { answered: "redis" }),
      lookups: await metricTotal(cached, "gateway_queue_line_view_total", { what: "lookups" }),
      found: await metricTotal(cached, "gateway_queue_line_view_total", { what: "found" }),
    });
    const before = await counts();
    const res = await cached.request(`/v1/events/${eventId}/queue/status`, {
      token,
      headers: { "x-forwarded-for": freshIp() },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; position: number };
    expect([body.status, body.position]).toEqual(["waiting", 7]);
    const after = await counts();
    expect({
      cache: after.cache - before.cache,
      redis: after.redis - before.redis,
      lookups: after.lookups - before.lookups,
      found: after.found - before.found,
    }).toEqual({ cache: 1, redis: 0, lookups: 1, found: 1 });
    // Counters only grow: a second scrape with nothing new adds nothing.
    expect(await counts()).toEqual(after);
  });
});

describe("while Redis is down", () => {
  it("polls and joins are counted in memory at the same limits: 429 past them, else 503", async () => {
    const eventId = await waitingEvent();
    const token = await joined(eventId, "rt_down");
    await killRedis(redis, [gw]);
    const ip = freshIp();
    const polls = await Promise.all(Array.from({ length: 12 }, () => poll(eventId, token)));
    const pollStatuses = polls.map((r) => r.status);
    expect(pollStatuses.filter((s) => s !== 503 && s !== 429)).toEqual([]);
    expect(pollStatuses.filter((s) => s === 503).length).toBeGreaterThanOrEqual(PER_FAN * 2);
    expect(pollStatuses.filter((s) => s === 503).length).toBeLessThanOrEqual(PER_FAN * 2 + 2);
    await expectRateLimited(polls.find((r) => r.status === 429)!, "fan:status");
    expect(Number(polls.find((r) => r.status === 503)!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

    const joins = await Promise.all(Array.from({ length: 20 }, (_, i) => join(eventId, `rt_down_${i}`, ip)));
    const joinStatuses = joins.map((r) => r.status);
    expect(joinStatuses.filter((s) => s !== 503 && s !== 429)).toEqual([]);
    expect(joinStatuses.filter((s) => s === 503).length).toBeGreaterThanOrEqual(PER_IP * 2);
    expect(joinStatuses.filter((s) => s === 503).length).toBeLessThanOrEqual(PER_IP * 2 + 2);
    await expectRateLimited(joins.find((r) => r.status === 429)!, "ip:join");
  });
});
