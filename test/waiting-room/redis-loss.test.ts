/**
 * Redis killed mid-sale and started again EMPTY (its own redis-server, SIGKILL, same port, no
 * persistence), under in-process gateways: what fans in line, admitted fans and the operator get
 * while it is down and after it is back. DynamoDB is the shared test endpoint; nothing is mocked.
 *
 * The steps share one sale and run in order: before the loss, while Redis is down, after it
 * returns. Timings are printed as figures, never asserted.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { killRedis, redisCheckOf, restartRedis } from "../support/redis-loss.js";
import { startGatewayProcess } from "../support/processes.js";
import {
  ADMIN_TOKEN,
  type AdmittedFan,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  putEvent,
  SECRET,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { createWaitingRoom, type ConfigureInput, createTokenService } from "../../src/waiting-room/index.js";
import { eventId as freshEventId, occupied, SECRET as ROOM_SECRET, ok, until } from "./helpers.js";

interface ErrorBody {
  error: { code: string; message: string; requestId: string; details?: Record<string, unknown> };
}
interface Place {
  status: string;
  position: number;
  ahead: number;
  queueToken?: string;
  accessToken?: string;
}
interface Info {
  state: string;
  lottery: { commitment: string; seed?: string };
}

let redis: SpawnedRedis;
let port: number;
let gwA: Gateway;
let gwB: Gateway;
const eventId = uniqueId("rl");
/** Admitted before the loss (maxActive 3): alice, bob, carol. In line: dave, erin. */
let admitted: AdmittedFan[];
let inLine: { fanId: string; queueToken: string; position: number }[];
let commitmentBefore: string;
/** Every status any request of this file got: nothing but 503 may be a 5xx. */
const statuses: number[] = [];
const figures: Record<string, number> = {};

async function call(gw: Gateway, path: string, init?: Parameters<Gateway["request"]>[1]) {
  const started = performance.now();
  const res = await gw.request(path, init);
  statuses.push(res.status);
  return { res, ms: performance.now() - started };
}

async function expect503(res: Response): Promise<ErrorBody> {
  const body = (await res.json()) as ErrorBody;
  expect({ status: res.status, code: body.error?.code }).toEqual({ status: 503, code: "unavailable" });
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(body.error.requestId).toBe(res.headers.get("x-request-id"));
  return body;
}

// Until the gateways have noticed, a call may still be attempted (and fail): wait for both.
const killBoth = () => killRedis(redis, [gwA, gwB]);
const restartBoth = async () => {
  redis = await restartRedis(port, [gwA, gwB]);
};

function holdSeats(gw: Gateway, fan: AdmittedFan, seats: string[]) {
  return call(gw, `/v1/events/${eventId}/holds`, { method: "POST", json: { seats }, token: fan.accessToken });
}

beforeAll(async () => {
  redis = await spawnRedis();
  port = redis.port;
  const tableName = await createTable();
  gwA = await startGateway({ tableName, redisUrl: redis.url });
  gwB = await startGateway({ tableName, redisUrl: redis.url });
  const input = eventInput({ waitingRoom: { admitPerSecond: 10_000, maxActive: 3, sessionSeconds: 600 } });
  expect((await putEvent(gwA, eventId, input)).status).toBe(201);
  admitted = await admitFans(gwA, eventId, ["alice", "bob", "carol"]);
  inLine = [];
  for (const fanId of ["dave", "erin"]) {
    const { res } = await call(gwA, `/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } });
    expect(res.status).toBe(201);
    const body = (await res.json()) as Place;
    expect(body.status).toBe("waiting");
    inLine.push({ fanId, queueToken: body.queueToken ?? "", position: body.position });
  }
  const info = (await (await gwA.request(`/v1/events/${eventId}/waiting-room`)).json()) as Info;
  commitmentBefore = info.lottery.commitment;
}, 120_000);

afterAll(async () => {
  console.log(`redis loss (waiting room): ${JSON.stringify(figures)}`);
  await Promise.all([gwA?.close(), gwB?.close()]);
  await redis?.close();
});

describe("while Redis is down", () => {
  beforeAll(killBoth, 90_000);

  it("join, status poll and the public info answer 503 unavailable with Retry-After, at once", async () => {
    const [join, status, info] = await Promise.all([
      call(gwA, `/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "frank" } }),
      call(gwB, `/v1/events/${eventId}/queue/status`, { token: inLine[0]!.queueToken }),
      call(gwA, `/v1/events/${eventId}/waiting-room`),
    ]);
    await expect503(join.res);
    await expect503(status.res);
    await expect503(info.res);
    figures.joinMsWhileDown = Math.round(join.ms);
    figures.statusMsWhileDown = Math.round(status.ms);
  });

  it("holds and releases with valid access tokens keep working against DynamoDB", async () => {
    const [alice, bob] = admitted as [AdmittedFan, AdmittedFan];
    const won = await holdSeats(gwA, alice, ["A-1-1"]);
    expect(won.res.status).toBe(201);
    const wonHold = (await won.res.json()) as { holdId: string };
    figures.holdMsWhileDown = Math.round(won.ms);

    // DynamoDB alone decides: the same seat for another fan, on the other gateway, is refused.
    const lost = await holdSeats(gwB, bob, ["A-1-1"]);
    expect(lost.res.status).toBe(409);
    expect(((await lost.res.json()) as ErrorBody).error.code).toBe("seat_unavailable");

    const released = await call(gwB, `/v1/events/${eventId}/holds/${wonHold.holdId}`, {
      method: "DELETE",
      token: alice.accessToken,
    });
    expect(released.res.status).toBe(204);
    figures.releaseMsWhileDown = Math.round(released.ms);

    // Many holds at once on distinct seats: all decided by DynamoDB, none waits for Redis.
    const fans = admitted.map((fan, i) => ({ fan, seat: `A-2-${i + 1}` }));
    const many = await Promise.all(fans.map(({ fan, seat }) => holdSeats(gwA, fan, [seat])));
    expect(many.map((m) => m.res.status)).toEqual([201, 201, 201]);
    figures.concurrentHoldsSlowestMs = Math.round(Math.max(...many.map((m) => m.ms)));
  });

  it("a purchase answers 503 and charges nothing: the provider cannot be reached", async () => {
    const carol = admitted[2]!;
    const held = await holdSeats(gwA, carol, ["B-1-1"]);
    expect(held.res.status).toBe(201);
    const hold = (await held.res.json()) as { holdId: string };
    const bought = await call(gwA, `/v1/events/${eventId}/holds/${hold.holdId}/purchase`, {
      method: "POST",
      token: carol.accessToken,
      headers: { "idempotency-key": "carol-during-outage" },
      json: { paymentToken: "tok_ok" },
    });
    const body = await expect503(bought.res);
    const purchaseId = String(body.error.details?.purchaseId);
    const purchase = await gwA.deps.inventory.purchases.get({ eventId, purchaseId });
    expect(purchase).toMatchObject({ status: "failed", failureReason: "provider_error" });
    figures.purchaseMsWhileDown = Math.round(bought.ms);
  });

  it("the operator's stats answer 503, not 500", async () => {
    const { res } = await call(gwB, `/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN });
    expect([200, 503]).toContain(res.status);
  });
});

describe("after Redis returns empty", () => {
  beforeAll(restartBoth, 150_000);

  it("the room is configured again from the stored event, once, however many fans ask at once on two gateways", async () => {
    const newcomers = Array.from({ length: 20 }, (_, i) => `late-${i}`);
    const asks = await Promise.all([
      ...newcomers.map((fanId, i) =>
        call(i % 2 ? gwA : gwB, `/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } }),
      ),
      ...Array.from({ length: 10 }, (_, i) => call(i % 2 ? gwA : gwB, `/v1/events/${eventId}/waiting-room`)),
    ]);
    expect(asks.map((a) => a.res.status).every((s) => s === 200 || s === 201)).toBe(true);
    const infos = (await Promise.all(asks.slice(newcomers.length).map((a) => a.res.json()))) as Info[];
    const commitments = new Set(infos.map((i) => i.lottery.commitment));
    expect(commitments.size).toBe(1);
    // The same seed: it was committed in DynamoDB at the first configure, and the restore took it
    // from there, so losing Redis did not re-roll the draw.
    expect([...commitments][0]).toBe(commitmentBefore);
    // The settings are the event's (maxActive 3, as PUT): only one room was created, by a restore.
    const history = ok(await gwA.deps.waitingRoom.settingsHistory(eventId));
    expect(history.changes.map((c) => c.kind)).toEqual(["restore"]);
    expect(history.changes[0]?.fields).toMatchObject({ maxActive: "3", admitPerSecond: "10000" });
  });

  it("a fan who was in line is placed in the new line by the next status poll, with a new queue token", async () => {
    const dave = inLine[0]!;
    const { res } = await call(gwB, `/v1/events/${eventId}/queue/status`, { token: dave.queueToken });
    expect(res.status).toBe(200);
    const place = (await res.json()) as Place;
    expect(["waiting", "admitted"]).toContain(place.status);
    expect(place.position).toBeGreaterThan(0);
    expect(place.queueToken).toEqual(expect.any(String));
    // The old token keeps working, and the next poll finds the same place (no second one).
    const again = (await (
      await call(gwA, `/v1/events/${eventId}/queue/status`, { token: dave.queueToken })
    ).res.json()) as Place;
    expect(again.position).toBe(place.position);
    expect(again.queueToken).toBeUndefined();
    // And the new token works too.
    const viaNew = await call(gwA, `/v1/events/${eventId}/queue/status`, { token: place.queueToken! });
    expect(((await viaNew.res.json()) as Place).position).toBe(place.position);
    figures.replacedPosition = place.position;
    figures.positionBeforeLoss = dave.position;
  });

  it("a session admitted before the loss keeps working until its token expires (not 401)", async () => {
    const alice = admitted[0]!;
    // The new room has admitted three of the late fans above: its first sessions, as alice's was
    // the lost room's first.
    const before = ok(await gwA.deps.waitingRoom.stats(eventId)).stats;
    expect(occupied(before)).toBe(3);
    const held = await holdSeats(gwA, alice, ["B-2-1"]);
    expect(held.res.status).toBe(201);
    const hold = (await held.res.json()) as { holdId: string };
    // And buys: the provider is back.
    const bought = await call(gwB, `/v1/events/${eventId}/holds/${hold.holdId}/purchase`, {
      method: "POST",
      token: alice.accessToken,
      headers: { "idempotency-key": "alice-after" },
      json: { paymentToken: "tok_ok" },
    });
    expect(bought.res.status).toBe(201);
    // Her purchase completes a session id the new room never issued: no session of the new room
    // ends. (Ids were once the lottery commitment's prefix and a counter; a room created again keeps
    // the commitment and restarts the counter, so this completed a late fan's session and admitted
    // the next one in its slot.)
    const after = ok(await gwA.deps.waitingRoom.stats(eventId)).stats;
    expect({ completed: after.completed, admitted: after.admitted, occupied: occupied(after) }).toEqual({
      completed: before.completed,
      admitted: before.admitted,
      occupied: 3,
    });
  });

  it("without an operator change, the room comes back with the PUT's settings; a change applies on it", async () => {
    const settings = ok(await gwA.deps.waitingRoom.stats(eventId)).settings;
    expect(settings.maxActive).toBe(3);
    const { res } = await call(gwB, `/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ADMIN_TOKEN,
      json: { maxActive: 1_000 },
    });
    expect(res.status).toBe(200);
    expect(ok(await gwA.deps.waitingRoom.stats(eventId)).settings.maxActive).toBe(1_000);
  });

  it("a session that ended in the new epoch is still refused on replay", async () => {
    const [grace] = await admitFans(gwA, eventId, ["grace"]);
    const held = await holdSeats(gwA, grace!, ["B-2-5"]);
    expect(held.res.status).toBe(201);
    const hold = (await held.res.json()) as { holdId: string };
    const bought = await call(gwA, `/v1/events/${eventId}/holds/${hold.holdId}/purchase`, {
      method: "POST",
      token: grace!.accessToken,
      headers: { "idempotency-key": "grace-1" },
      json: { paymentToken: "tok_ok" },
    });
    expect(bought.res.status).toBe(201);
    const replay = await holdSeats(gwB, grace!, ["B-2-6"]);
    expect(replay.res.status).toBe(401);
    expect(((await replay.res.json()) as ErrorBody).error.message).toMatch(/session has ended/);
  });

  it("a claim finding no room trusts the token and brings the room back by itself", async () => {
    // Lose the data once more, without anyone polling the line afterwards.
    const admin = await spawnAdminClient();
    await admin.flushall();
    admin.disconnect();
    const bob = admitted[1]!;
    const held = await holdSeats(gwB, bob, ["B-2-9"]);
    expect(held.res.status).toBe(201);
    await until(async () => {
      const history = await gwB.deps.waitingRoom.settingsHistory(eventId);
      return history.ok && history.changes.some((c) => c.kind === "restore") ? true : undefined;
    }, 30_000);
  });

  it("nothing answered a 5xx other than 503", () => {
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
  });
});

/** A plain client of the test's own Redis (FLUSHALL is fine there: nothing else uses it). */
async function spawnAdminClient() {
  return new Redis(redis.url, { maxRetriesPerRequest: 1 });
}

describe("the gateway process (src/main.ts, gateway and workers) on a Redis killed and started again", () => {
  it("answers 503 at once while it is down, claims go on, and the room, schedules and line come back", {
    timeout: 240_000,
  }, async () => {
    let own = await spawnRedis();
    const gw = await startGatewayProcess({
      REDIS_URL: own.url,
      DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
      DYNAMODB_TABLE: `rl_${uniqueId("p")}`,
      DATA_DIR: mkdtempSync(join(tmpdir(), "redis-loss-")),
      DEMO_EVENT: "false",
      ADMIN_TOKEN,
      GATEWAY_SECRET: SECRET,
    });
    const seen: number[] = [];
    const http = async (path: string, init: { method?: string; json?: unknown; token?: string } = {}) => {
      const headers: Record<string, string> = {};
      if (init.json !== undefined) headers["content-type"] = "application/json";
      if (init.token) headers.authorization = `Bearer ${init.token}`;
      const started = performance.now();
      const res = await fetch(`${gw.url}${path}`, {
        method: init.method ?? "GET",
        headers,
        ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
      });
      seen.push(res.status);
      return { res, ms: performance.now() - started };
    };
    try {
      const evt = uniqueId("p");
      const put = await http(`/v1/admin/events/${evt}`, { method: "PUT", json: eventInput(), token: ADMIN_TOKEN });
      expect(put.res.status).toBe(201);
      const joined = (await (
        await http(`/v1/events/${evt}/queue`, { method: "POST", json: { fanId: "alice" } })
      ).res.json()) as Place;
      const alice = await until(async () => {
        const place = (await (
          await http(`/v1/events/${evt}/queue/status`, { token: joined.queueToken! })
        ).res.json()) as Place;
        return place.accessToken;
      }, 60_000);

      const exited = new Promise((resolve) => own.child.once("exit", resolve));
      own.child.kill("SIGKILL");
      await exited;
      await until(
        async () => ((await redisCheckOf((await http("/readyz")).res)) === "down" ? true : undefined),
        60_000,
      );

      const join = await http(`/v1/events/${evt}/queue`, { method: "POST", json: { fanId: "bob" } });
      await expect503(join.res);
      const hold = await http(`/v1/events/${evt}/holds`, { method: "POST", json: { seats: ["A-1-1"] }, token: alice });
      expect(hold.res.status).toBe(201);
      figures.processJoinMsWhileDown = Math.round(join.ms);
      figures.processHoldMsWhileDown = Math.round(hold.ms);

      own = await spawnRedis({ port: own.port });
      await until(
        async () => ((await redisCheckOf((await http("/readyz")).res)) === "ok" ? true : undefined),
        120_000,
        100,
      );
      const rejoined = await http(`/v1/events/${evt}/queue`, { method: "POST", json: { fanId: "bob" } });
      expect(rejoined.res.status).toBe(201);
      const again = await http(`/v1/events/${evt}/holds`, { method: "POST", json: { seats: ["A-1-2"] }, token: alice });
      expect(again.res.status).toBe(201);

      // The event's job schedulers, lost with the data, are armed again on the reconnect itself.
      await until(
        async () => (gw.logs.some((l) => l.includes("event job schedules armed again")) ? true : undefined),
        60_000,
        100,
      );
      const probe = new Redis(own.url, { maxRetriesPerRequest: 1 });
      try {
        await until(
          async () => {
            const keys = await probe.keys("{onsale}:hold-sweep:repeat*");
            return keys.length > 0 ? true : undefined;
          },
          60_000,
          200,
        );
      } finally {
        probe.disconnect();
      }
      expect(gw.alive()).toBe(true);
      expect(seen.filter((s) => s >= 500 && s !== 503)).toEqual([]);
      expect(gw.logs.join("\n")).not.toMatch(/unhandled|uncaught/i);
    } finally {
      await gw.stop("SIGTERM");
      await own.close();
    }
  });
});

describe("the waiting-room module: epochs and restore (shared Redis; remove() stands for the loss)", () => {
  const client = () => new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
  const settings: ConfigureInput = {
    onSaleAt: Date.now() - 1_000,
    admitPerSecond: 1_000,
    maxActive: 100,
    sessionSeconds: 600,
  };

  it("tokens carry the room epoch; a session is refused only by a room of its own epoch", async () => {
    const redisClient = client();
    const stored = new Map<string, ConfigureInput>();
    const room = createWaitingRoom({
      redis: redisClient,
      secret: ROOM_SECRET,
      restore: async (id) => stored.get(id) ?? null,
    });
    const tokens = createTokenService({ secret: ROOM_SECRET });
    try {
      const evt = freshEventId("epoch");
      stored.set(evt, settings);
      ok(await room.configure(evt, settings));
      const joined = ok(await room.join(evt, "ann"));
      const place = ok(await room.statusOf(evt, "ann")).place;
      if (place.status !== "admitted") throw new Error(`ann not admitted: ${place.status}`);
      const queueClaims = await tokens.verifyQueueToken(joined.queueToken, evt);
      const accessClaims = await tokens.verifyAccessToken(place.accessToken, evt);
      if (!queueClaims.ok || !accessClaims.ok) throw new Error("tokens refused");
      const epoch = accessClaims.claims.epoch;
      expect(epoch).toMatch(/^[0-9a-f]{16}$/);
      expect(queueClaims.claims.epoch).toBe(epoch);

      expect(await room.isSessionActive(evt, place.sessionId, epoch)).toEqual({
        ok: true,
        active: true,
        decided: true,
      });
      ok(await room.completeSession(evt, place.sessionId));
      // Same epoch, ended: refused (a replay after the purchase).
      expect(await room.isSessionActive(evt, place.sessionId, epoch)).toEqual({
        ok: true,
        active: false,
        decided: true,
      });

      // The loss: no room. Undecided (the token is trusted), and the room comes back by itself.
      const firstCommitment = ok(await room.info(evt)).info.lottery.commitment;
      ok(await room.remove(evt));
      expect(await room.isSessionActive(evt, place.sessionId, epoch)).toEqual({
        ok: true,
        active: false,
        decided: false,
      });
      await until(async () => ((await redisClient.exists(`wr:{evt:${evt}}:room`)) === 1 ? true : undefined));
      // Restored: another epoch, still undecided for the old session; strict mode says not active.
      expect(await room.isSessionActive(evt, place.sessionId, epoch)).toMatchObject({ ok: true, decided: false });
      expect(await room.isSessionActive(evt, place.sessionId)).toEqual({ ok: true, active: false, decided: true });
      expect(ok(await room.info(evt)).info.lottery.commitment).not.toBe(firstCommitment);

      // The fan's old queue token: the poll places her in the new line, with a new token.
      const polled = ok(await room.status(evt, joined.queueToken));
      expect(polled.replaced?.queueToken).toEqual(expect.any(String));
      const newClaims = await tokens.verifyQueueToken(polled.replaced!.queueToken, evt);
      expect(newClaims.ok && newClaims.claims.epoch).not.toBe(epoch);
      // By fan id without `rejoin` nothing is re-placed (an unknown fan stays unknown).
      expect(await room.statusOf(evt, "nobody-here")).toEqual({ ok: false, reason: "not_joined" });
      expect(
        await room.statusOf(evt, "nobody-here", { rejoin: { epoch: newClaims.ok ? newClaims.claims.epoch : "" } }),
      ).toEqual({ ok: false, reason: "not_joined" });
    } finally {
      redisClient.disconnect();
    }
  });

  it("a restore never touches an existing room, and many restores at once create one room", async () => {
    const clients = [client(), client(), client()];
    const evt = freshEventId("restore");
    let reads = 0;
    const rooms = clients.map((redis) =>
      createWaitingRoom({
        redis,
        secret: ROOM_SECRET,
        restore: async (id) => {
          reads++;
          return id === evt ? settings : null;
        },
      }),
    );
    try {
      const outcomes = await Promise.all(
        rooms.map((room) => Promise.all([room.restoreRoom(evt), room.restoreRoom(evt)])),
      );
      // Concurrent restores in one process share one (same answer, one read of the event)...
      for (const [a, b] of outcomes) expect(a).toBe(b);
      expect(reads).toBe(3);
      // ...and across processes exactly one creates the room.
      expect(outcomes.map(([a]) => a).sort()).toEqual(["exists", "exists", "restored"]);
      const history = ok(await rooms[0]!.settingsHistory(evt)).changes;
      expect(history.map((c) => c.kind)).toEqual(["restore"]);

      // The operator changes a setting; a late restore from the stored event leaves it alone.
      ok(await rooms[1]!.updateSettings(evt, { maxActive: 7 }));
      expect(await rooms[2]!.restoreRoom(evt)).toBe("exists");
      expect(ok(await rooms[0]!.stats(evt)).settings.maxActive).toBe(7);

      // An unknown event is not created, and the answer is remembered for a moment.
      const unknown = freshEventId("unknown");
      expect(await rooms[0]!.join(unknown, "fan")).toEqual({ ok: false, reason: "not_found" });
      const before = reads;
      expect(await rooms[0]!.info(unknown)).toEqual({ ok: false, reason: "not_found" });
      expect(reads).toBe(before);
    } finally {
      for (const c of clients) c.disconnect();
    }
  });
  it("a restore that finds the room there leaves no revoked records under shard keys no room names (records on the shards)", async () => {
    const redis = client();
    const evt = freshEventId("orphans");
    const room = createWaitingRoom({
      redis,
      secret: ROOM_SECRET,
      fanShards: 3,
      claims: "shards",
      restore: async (id) => (id === evt ? { ...settings, revoked: ["revoked-1", "revoked-2", "revoked-3"] } : null),
    });
    try {
      ok(await room.configure(evt, settings));
      ok(await room.join(evt, "in-line"));
      // Another restorer's room is there: this one writes its revoked records first (on its own
      // epoch's shards), then finds the room and creates nothing.
      expect(await room.restoreRoom(evt)).toBe("exists");
      const named = new Set(((await redis.hget(`wr:{evt:${evt}}:room`, "fanShardTags")) ?? "").split(","));
      const keys: string[] = [];
      for await (const batch of redis.scanStream({ match: `wr:{evt:${evt}:*`, count: 1_000 })) {
        keys.push(...(batch as string[]));
      }
      const tagOf = (key: string) => key.slice(key.indexOf("{") + 1, key.indexOf("}"));
      expect(keys.length).toBeGreaterThan(0); // the room's own shard keys (the fan in line)
      expect(keys.filter((key) => !named.has(tagOf(key)))).toEqual([]);
      // The room's own records are untouched: the fan in line is still there.
      expect(ok(await room.statusOf(evt, "in-line")).place.status).not.toBe("revoked");
    } finally {
      await room.close();
      redis.disconnect();
    }
  });

  it("a room the operator had paused is created paused, in one step (never open in between)", async () => {
    const redis = client();
    const evt = freshEventId("paused");
    const room = createWaitingRoom({
      redis,
      secret: ROOM_SECRET,
      restore: async (id) => (id === evt ? { ...settings, paused: true } : null),
    });
    try {
      expect(await room.restoreRoom(evt)).toBe("restored");
      expect(ok(await room.stats(evt)).settings.paused).toBe(true);
      // One change, the restore itself: no later 'settings' change paused it.
      expect(ok(await room.settingsHistory(evt)).changes.map((c) => c.kind)).toEqual(["restore"]);
    } finally {
      redis.disconnect();
    }
  });
  it("a restored room asks the proof of work and the invite it asked before, from its first join", async () => {
    const redis = client();
    const evt = freshEventId("botsr");
    const room = createWaitingRoom({
      redis,
      secret: ROOM_SECRET,
      restore: async (id) => (id === evt ? { ...settings, powBits: 12, invites: true } : null),
    });
    try {
      // The first call finds no room: the restore runs inside the join, which is then refused.
      expect(await room.join(evt, "bot-1")).toEqual({ ok: false, reason: "pow_required", powBits: 12 });
      const restored = ok(await room.stats(evt)).settings;
      expect(restored).toMatchObject({ powBits: 12, invites: true });
      expect(await room.join(evt, "fan-1", { credentials: { proofBits: 12 } })).toEqual({
        ok: false,
        reason: "invite_required",
      });
      expect((await room.join(evt, "fan-1", { credentials: { proofBits: 12, invite: true } })).ok).toBe(true);
      expect(ok(await room.settingsHistory(evt)).changes.map((c) => c.kind)).toEqual(["restore"]);
    } finally {
      redis.disconnect();
    }
  });
});

describe("an operator's change survives the loss: it is kept on the stored event", () => {
  it("a room paused and slowed by PATCH comes back paused, at the operator's rate, its admission loop on", async () => {
    const own = await spawnRedis();
    const tableName = await createTable();
    const gw = await startGateway({ tableName, redisUrl: own.url });
    try {
      const id = uniqueId("rp");
      const input = eventInput({ waitingRoom: { admitPerSecond: 10_000, maxActive: 50, sessionSeconds: 600 } });
      expect((await putEvent(gw, id, input)).status).toBe(201);
      const { res } = await call(gw, `/v1/admin/events/${id}/waiting-room`, {
        method: "PATCH",
        token: ADMIN_TOKEN,
        json: { paused: true, admitPerSecond: 7, maxActive: 40 },
      });
      expect(res.status).toBe(200);
      // The loop turned on, with its bounds and targets: it must come back on, with them.
      const loop = {
        enabled: true,
        minPerSecond: 3,
        maxPerSecond: 70,
        targetClaimP99Ms: 180,
        maxThrottlesPerSecond: 2,
      };
      const turnedOn = await call(gw, `/v1/admin/events/${id}/waiting-room`, {
        method: "PATCH",
        token: ADMIN_TOKEN,
        json: { autoAdmit: loop },
      });
      expect(turnedOn.res.status).toBe(200);
      const stored = await gw.deps.inventory.events.get({ eventId: id });
      expect(stored?.roomSettings).toMatchObject({ paused: true, admitPerSecond: 7, maxActive: 40, autoAdmit: loop });

      await killRedis(own, [gw]);
      const again = await restartRedis(own.port, [gw]);
      try {
        // A fan arrives: the room is restored on the way, paused, so nobody is let in.
        const joined = await call(gw, `/v1/events/${id}/queue`, { method: "POST", json: { fanId: "zoe" } });
        expect(joined.res.status).toBe(201);
        const settings = ok(await gw.deps.waitingRoom.stats(id)).settings;
        expect(settings).toMatchObject({ paused: true, admitPerSecond: 7, maxActive: 40, autoAdmit: loop });
        const status = await call(gw, `/v1/events/${id}/queue/status`, {
          token: ((await joined.res.json()) as Place).queueToken,
        });
        expect(status.res.status).toBe(200);
        expect(((await status.res.json()) as { accessToken?: string }).accessToken).toBeUndefined();
      } finally {
        await gw.close();
        await again.close();
      }
    } finally {
      await own.close();
    }
  }, 240_000);

  it("changes racing on two gateways leave on the event the settings Redis holds last, and the room comes back with them", async () => {
    const own = await spawnRedis();
    const tableName = await createTable();
    const pair = [
      await startGateway({ tableName, redisUrl: own.url }),
      await startGateway({ tableName, redisUrl: own.url }),
    ];
    try {
      const id = uniqueId("rr");
      const input = eventInput({ waitingRoom: { admitPerSecond: 10_000, maxActive: 50, sessionSeconds: 600 } });
      expect((await putEvent(pair[0]!, id, input)).status).toBe(201);
      // Thirty operators' changes in flight at once, half on each gateway: each its own maxActive.
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          call(pair[i % 2]!, `/v1/admin/events/${id}/waiting-room`, {
            method: "PATCH",
            token: ADMIN_TOKEN,
            json: { maxActive: 100 + i, admitPerSecond: 200 + i },
          }),
        ),
      );
      expect(answers.map((a) => a.res.status)).toEqual(Array(30).fill(200));
      const last = ok(await pair[0]!.deps.waitingRoom.stats(id)).settings;
      const stored = await pair[1]!.deps.inventory.events.get({ eventId: id });
      expect({
        maxActive: stored?.roomSettings?.maxActive,
        admitPerSecond: stored?.roomSettings?.admitPerSecond,
      }).toEqual({ maxActive: last.maxActive, admitPerSecond: last.admitPerSecond });
      expect(stored?.roomSettings?.version).toBeGreaterThan(0);

      await killRedis(own, pair);
      const again = await restartRedis(own.port, pair);
      try {
        const joined = await call(pair[1]!, `/v1/events/${id}/queue`, { method: "POST", json: { fanId: "yan" } });
        expect(joined.res.status).toBe(201);
        expect(ok(await pair[1]!.deps.waitingRoom.stats(id)).settings).toMatchObject({
          maxActive: last.maxActive,
          admitPerSecond: last.admitPerSecond,
        });
        // The restored room's next change is kept over the copy it came back from.
        const next = await call(pair[0]!, `/v1/admin/events/${id}/waiting-room`, {
          method: "PATCH",
          token: ADMIN_TOKEN,
          json: { maxActive: 7 },
        });
        expect(next.res.status).toBe(200);
        const after = await pair[0]!.deps.inventory.events.get({ eventId: id });
        expect(after?.roomSettings?.maxActive).toBe(7);
        expect(after?.roomSettings?.version).toBeGreaterThan(stored!.roomSettings!.version!);
      } finally {
        await Promise.all(pair.map((g) => g.close()));
        await again.close();
      }
    } finally {
      await own.close();
    }
  }, 240_000);
});
