/**
 * The same scripts through the same module on a 3-node Redis Cluster started here (and torn
 * down after): join, status and admission, the lottery, settings. Events are picked so that the
 * three of them live on three different nodes.
 */
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createWaitingRoom,
  lotteryOrder,
  seedMatchesCommitment,
  waitingRoomKeys,
  type WaitingRoom,
} from "../../src/waiting-room/index.js";
import {
  clusterClient,
  idsOnMasters,
  ownerOf,
  type SpawnedRedisCluster,
  spawnRedisCluster,
} from "../support/redis-cluster.js";
import { SECRET, drawnEverywhere, eventId, fanOut, fans, ok, until } from "./helpers.js";

let redisCluster: SpawnedRedisCluster | undefined;
const clients: Cluster[] = [];
let rooms: WaitingRoom[] = [];
/** One event id per cluster node. */
let events: string[] = [];

beforeAll(async () => {
  redisCluster = await spawnRedisCluster({ masters: 3 });
  for (let i = 0; i < 2; i++) clients.push(await clusterClient(redisCluster));
  rooms = clients.map((redis) => createWaitingRoom({ redis, secret: SECRET }));

  // From the cluster's own CLUSTER SLOTS, not the client's cached slot map (bounded: it throws
  // rather than spin when a master serves nothing).
  events = await idsOnMasters(clients[0]!, { count: 3, make: () => eventId("cluster"), keyOf: roomKey });
}, 60_000);

const roomKey = (evt: string) => waitingRoomKeys(evt).room;

/** A fresh event id served by the same node as `evt`. */
async function eventBeside(evt: string): Promise<string> {
  const on = await ownerOf(clients[0]!, roomKey(evt));
  const [beside] = await idsOnMasters(clients[0]!, { count: 1, make: () => eventId("cluster"), keyOf: roomKey, on });
  return beside!;
}

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await redisCluster?.close();
});

const past = () => Date.now() - 1_000;

describe("on a 3-node Redis Cluster", () => {
  it("places 3 x 1,000 concurrent joins on three nodes 1..1,000 each; repeats keep the place", async () => {
    for (const evt of events)
      ok(await rooms[0]!.configure(evt, { onSaleAt: past(), admitPerSecond: 0, maxActive: 10, sessionSeconds: 60 }));
    const work = events.flatMap((evt) => fans(1_000).map((fanId) => ({ evt, fanId })));
    const joined = await fanOut(rooms, work, (r, { evt, fanId }) => r.join(evt, fanId));
    const again = await fanOut([...rooms].reverse(), work, (r, { evt, fanId }) => r.join(evt, fanId));
    for (const evt of events) {
      const positions = joined
        .map(ok)
        .filter((_, i) => work[i]!.evt === evt)
        .map((j) => j.place.position);
      expect([...positions].sort((a, b) => a - b)).toEqual(Array.from({ length: 1_000 }, (_, i) => i + 1));
    }
    again.forEach((j, i) => {
      expect(ok(j).created).toBe(false);
      expect(ok(j).place.position).toBe(ok(joined[i]!).place.position);
    });
    for (const evt of events)
      expect(ok(await rooms[1]!.stats(evt)).stats).toMatchObject({ joined: 1_000, waiting: 1_000 });
  });

  it("admits up to maxActive, frees slots on completion and refuses revoked sessions", async () => {
    const evt = await eventBeside(events[1]!);
    ok(await rooms[0]!.configure(evt, { onSaleAt: past(), admitPerSecond: 0, maxActive: 5, sessionSeconds: 60 }));
    for (const fanId of fans(10)) ok(await rooms[0]!.join(evt, fanId));
    ok(await rooms[0]!.updateSettings(evt, { admitPerSecond: 1_000 }));
    const stats = await until(async () => {
      await fanOut(rooms, fans(10), (r, fanId) => r.statusOf(evt, fanId));
      const s = ok(await rooms[0]!.stats(evt)).stats;
      return s.admitted >= 5 ? s : undefined;
    });
    expect(stats).toMatchObject({ admitted: 5, active: 5 });
    const first = ok(await rooms[1]!.statusOf(evt, "fan-1")).place;
    if (first.status !== "admitted") throw new Error(`fan-1 is ${first.status}`);
    expect(await rooms[0]!.verifyAccessToken(first.accessToken, evt)).toMatchObject({
      ok: true,
      claims: { sessionId: first.sessionId },
    });
    expect(ok(await rooms[1]!.isSessionActive(evt, first.sessionId)).active).toBe(true);

    const admitted = (fanId: string) =>
      until(async () => (ok(await rooms[1]!.statusOf(evt, fanId)).place.status === "admitted" ? true : undefined));
    expect(ok(await rooms[0]!.completeSession(evt, first.sessionId)).freed).toBe(true);
    await admitted("fan-6"); // the freed slot, at the next admission the rate allows
    const second = ok(await rooms[0]!.statusOf(evt, "fan-2")).place;
    if (second.status !== "admitted") throw new Error(`fan-2 is ${second.status}`);
    ok(await rooms[1]!.revokeSession(evt, second.sessionId));
    expect(ok(await rooms[0]!.isSessionActive(evt, second.sessionId)).active).toBe(false);
    await admitted("fan-7");
    expect(ok(await rooms[0]!.stats(evt)).stats).toMatchObject({ admitted: 7, active: 5, completed: 1, revoked: 1 });
  });

  it("draws a verifiable pre-queue lottery", async () => {
    const evt = await eventBeside(events[0]!);
    const created = ok(
      await rooms[0]!.configure(evt, {
        onSaleAt: Date.now() + 3_600_000,
        admitPerSecond: 0,
        maxActive: 10,
        sessionSeconds: 60,
      }),
    );
    const ids = fans(300);
    await fanOut(rooms, ids, (r, fanId) => r.join(evt, fanId));
    const { info } = ok(await rooms[1]!.openNow(evt));
    expect(seedMatchesCommitment(info.lottery.seed!, created.info.lottery.commitment)).toBe(true);
    const expected = lotteryOrder(info.lottery.seed!, ids);
    await drawnEverywhere(rooms, evt, ids);
    const statuses = (await fanOut(rooms, ids, (r, fanId) => r.statusOf(evt, fanId))).map(ok);
    for (const s of statuses) expect(s.place.position).toBe(expected.indexOf(s.fanId) + 1);
    expect(ok(await rooms[0]!.lotteryPage(evt, { offset: 0, limit: 300 })).fanIds).toEqual(expected);
    ok(await rooms[0]!.remove(evt));
    expect(await rooms[0]!.info(evt)).toEqual({ ok: false, reason: "not_found" });
  });

  it("applies settings on every gateway at once and records each change", async () => {
    const evt = events[2]!;
    const changed = ok(await rooms[0]!.updateSettings(evt, { paused: true, sessionSeconds: 120, admitPerSecond: 25 }));
    expect(changed.changed).toBe(3);
    expect(changed.settings).toMatchObject({ paused: true, sessionSeconds: 120, admitPerSecond: 25 });
    expect(ok(await rooms[1]!.info(evt)).info).toMatchObject({ state: "paused", admitPerSecond: 25, waiting: 1_000 });
    expect(ok(await rooms[1]!.stats(evt)).settings).toEqual(changed.settings);
    const history = ok(await rooms[1]!.settingsHistory(evt)).changes;
    expect(history[0]).toMatchObject({
      kind: "settings",
      fields: { paused: "1", sessionSeconds: "120", admitPerSecond: "25" },
    });
    expect(history.at(-1)?.kind).toBe("create");
  });
});
