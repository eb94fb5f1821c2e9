/**
 * A hold of named seats goes to Redis once before DynamoDB and once after (issue 30 item 1): the
 * session check and the shield leave in one write, the seat map's change and the lease's return in
 * another. A best-available hold sends its session check with the shield's lease when this process's seat map
 * (its pages in memory) proposes, else with the map's first read in Redis. Counted on the gateway's own Redis socket (each write ioredis makes is a pipeline, sent
 * in one piece), against a real redis-server of the test's own; the hold is the real route's.
 *
 * And the session check's refusal still comes first and leaves nothing behind: a revoked fan's
 * hold is a 401, its lease is given back at once (another fan holds the seat next), nothing is
 * written to DynamoDB.
 */
import type { Socket } from "node:net";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import {
  ADMIN_TOKEN,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  putEvent,
  startGateway,
  uniqueId,
} from "./harness.js";
import { until } from "../waiting-room/helpers.js";

let redis: SpawnedRedis;
let gw: Gateway;

beforeAll(async () => {
  redis = await spawnRedis();
  // Pages trusted for a minute once read (a change heard of still drops them at once): so the
  // test, not CI's load, decides whether the map in memory is fresh when the hold comes.
  gw = await startGateway({
    tableName: await createTable(),
    redisUrl: redis.url,
    sectionPages: { revalidateMs: 60_000 },
  });
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await redis?.close();
});

/** A best-available hold of two seats (201), with the writes it made to Redis. */
async function bestPairHold(eventId: string, token: string): Promise<{ seats: string[]; writes: string[] }> {
  let seats: string[] = [];
  const writes = await writesDuring(async () => {
    const res = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token,
      json: { best: { quantity: 2 } },
    });
    expect(res.status).toBe(201);
    seats = ((await res.json()) as { seats: string[] }).seats;
  });
  expect(seats).toHaveLength(2);
  return { seats, writes };
}

/** The writes the gateway's command connection makes to Redis while `during` runs, as text. */
async function writesDuring(during: () => Promise<void>): Promise<string[]> {
  const socket = (gw.deps.clients.redis as Redis).stream as Socket;
  const writes: string[] = [];
  const write = socket.write;
  socket.write = function (this: Socket, chunk: unknown, ...rest: unknown[]) {
    writes.push(Buffer.isBuffer(chunk) ? chunk.toString("latin1") : String(chunk));
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as Socket["write"];
  try {
    await during();
  } finally {
    socket.write = write;
  }
  return writes;
}

async function newEvent(): Promise<string> {
  const eventId = uniqueId("hr");
  expect((await putEvent(gw, eventId, eventInput())).status).toBe(201);
  return eventId;
}

const hold = (eventId: string, token: string, seats: string[]) =>
  gw.request(`/v1/events/${eventId}/holds`, { method: "POST", token, json: { seats } });

describe("a hold's round trips to Redis", () => {
  it("a granted hold: the session check and the shield in one write, the map's change and the lease's return in one", async () => {
    const eventId = await newEvent();
    const [fan, other] = await admitFans(gw, eventId, ["rt-fan", "rt-other"]);
    // The section in Redis and the event in memory, as in a sale under way.
    expect((await hold(eventId, other!.accessToken, ["A-1-1"])).status).toBe(201);

    let status = 0;
    const writes = await writesDuring(async () => {
      status = (await hold(eventId, fan!.accessToken, ["A-1-2", "A-1-3"])).status;
    });
    expect(status).toBe(201);
    // Whose write is whose: the session check names the fan's session (its key set), the shield and
    // the lease's return the seats' lease keys, the map's change the section's keys and the seats.
    const leaseKey = `lease:{evt:${eventId}}:A-1-2`;
    const sessionCheck = writes.filter((w) => w.includes(`wr:{evt:${eventId}}:active`) && w.includes("rt-fan"));
    const withLease = writes.filter((w) => w.includes(leaseKey));
    expect(sessionCheck).toHaveLength(1);
    expect(withLease).toHaveLength(2);
    // Before DynamoDB: the shield rides in the session check's write.
    expect(withLease[0]).toBe(sessionCheck[0]);
    // After: the map's change (the section's status key) rides with the lease's return.
    expect(withLease[1]).toContain(`sm:{evt:${eventId}}:sec:A:st`);
    // Nothing else of this hold went to Redis.
    const ofThisHold = writes.filter((w) => w.includes("A-1-2") || w.includes("rt-fan"));
    expect(ofThisHold).toEqual(withLease);
  });

  it("best available: the session check rides with the map's first read, the map's change with the lease's return", async () => {
    const eventId = await newEvent();
    const [fan, other] = await admitFans(gw, eventId, ["rt-best", "rt-warm"]);
    expect((await hold(eventId, other!.accessToken, ["A-1-1"])).status).toBe(201);

    const { seats, writes } = await bestPairHold(eventId, fan!.accessToken);
    const sessionCheck = writes.filter((w) => w.includes(`wr:{evt:${eventId}}:active`) && w.includes("rt-best"));
    expect(sessionCheck).toHaveLength(1);
    // The event's availability counts, the first thing the proposal reads, in the same write.
    expect(sessionCheck[0]).toContain(`sm:{evt:${eventId}}:avail`);
    const leaseKey = `lease:{evt:${eventId}}:${seats[0]}`;
    const withLease = writes.filter((w) => w.includes(leaseKey));
    expect(withLease).toHaveLength(2);
    expect(withLease[1]).toContain(`sm:{evt:${eventId}}:sec:${seats[0]!.split("-")[0]}:st`);
  });

  it("best available from the map in memory: the shield is the one Redis call before DynamoDB, in the session check's write", async () => {
    const eventId = await newEvent();
    const [fan, other] = await admitFans(gw, eventId, ["rt-mem", "rt-mem-warm"]);
    expect((await hold(eventId, other!.accessToken, ["A-1-1", "A-1-2"])).status).toBe(201);
    // The fans' seat map read, as a crowd reads it: each section's page in this process's memory.
    const pages = gw.deps.sectionPages;
    await until(async () => {
      for (const section of ["A", "B"]) {
        expect((await gw.request(`/v1/events/${eventId}/sections/${section}/seats`)).status).toBe(200);
      }
      return ["A", "B"].every((section) => pages.peek(eventId, section) !== null) || undefined;
    });

    const { seats, writes } = await bestPairHold(eventId, fan!.accessToken);
    // A pair of the front row (the map's proposal), not the two seats the page shows held.
    expect(seats.every((id) => id.startsWith("A-1-") && id !== "A-1-1" && id !== "A-1-2")).toBe(true);
    const sessionCheck = writes.filter((w) => w.includes(`wr:{evt:${eventId}}:active`) && w.includes("rt-mem"));
    expect(sessionCheck).toHaveLength(1);
    const leaseKey = `lease:{evt:${eventId}}:${seats[0]}`;
    const withLease = writes.filter((w) => w.includes(leaseKey));
    expect(withLease).toHaveLength(2);
    // Before DynamoDB: the lease in the session check's write, and no read of the map in Redis.
    expect(withLease[0]).toBe(sessionCheck[0]);
    // Every write that touched the seat map or a lease is one of those two: no read of the map in Redis.
    const ofTheMap = writes.filter((w) => w.includes(`sm:{evt:${eventId}}:`) || w.includes(`lease:{evt:${eventId}}:`));
    expect(ofTheMap).toEqual(withLease);
    expect(withLease[0]).not.toContain(`sm:{evt:${eventId}}:avail`);
    // After: the map's change with the lease's return.
    expect(withLease[1]).toContain(`sm:{evt:${eventId}}:sec:A:st`);
  });

  it("a revoked fan's hold: 401, the lease given back at once, nothing written to DynamoDB", async () => {
    const eventId = await newEvent();
    const [gone, next] = await admitFans(gw, eventId, ["rt-revoked", "rt-next"]);
    const revoked = await gw.request(`/v1/admin/events/${eventId}/revocations`, {
      method: "POST",
      token: ADMIN_TOKEN,
      json: { fanId: "rt-revoked" },
    });
    expect(revoked.status).toBe(200);

    // Many at once, each refused on the session, whatever the seat (a free one, an unknown one).
    const refused = await Promise.all([
      hold(eventId, gone!.accessToken, ["A-2-1"]),
      hold(eventId, gone!.accessToken, ["A-2-1", "A-2-2"]),
      hold(eventId, gone!.accessToken, ["Z-9-9"]),
      gw.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: gone!.accessToken,
        json: { best: { quantity: 2 } },
      }),
    ]);
    for (const res of refused) {
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("unauthenticated");
    }
    const seat = await gw.deps.inventory.seats.listSection({ eventId, sectionId: "A", consistent: true });
    expect(seat?.seats.find((s) => s.id === "A-2-1")).toMatchObject({ status: "available" });
    expect(seat?.seats.find((s) => s.id === "A-2-1")?.holderId).toBeUndefined();
    // The revoked fan's leases are gone: the next fan's hold of the same seats is not refused by them.
    expect((await hold(eventId, next!.accessToken, ["A-2-1", "A-2-2"])).status).toBe(201);
  });
});
