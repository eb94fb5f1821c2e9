/**
 * The lottery draw runs as a job at onSaleAt (issue 18 item 2): with nobody polling and nobody
 * reading the queue info, the pre-queue is drawn all the same; a draw waiting for its drand round
 * is tried again until the round is recorded, then takes its randomness. An in-process gateway with its
 * workers on a redis-server of its own (the queues' prefix is the production one), the real local
 * DynamoDB.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import {
  ADMIN_TOKEN,
  createTable,
  eventInput,
  type Gateway,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { randomnessOf, roundAt } from "../../src/lottery/drand.js";
import { type TestChain, testChain } from "../support/drand-chain.js";
import { pollUntil } from "../support/worker-process.js";

let redisServer: SpawnedRedis;
let redis: Redis;
let gw: Gateway;

beforeAll(async () => {
  redisServer = await spawnRedis();
  redis = new Redis(redisServer.url);
  gw = await startGateway({ tableName: await createTable(), redisUrl: redisServer.url, workers: true });
}, 60_000);

afterAll(async () => {
  await gw?.close();
  redis?.disconnect();
  await redisServer?.close();
});

async function preQueued(
  onSaleInMs: number,
  fans: number,
  chain?: TestChain,
): Promise<{ eventId: string; onSaleAt: number }> {
  const eventId = uniqueId("dj");
  const at = Date.now() + onSaleInMs;
  const onSaleAt = new Date(at).toISOString();
  const waitingRoom = { admitPerSecond: 10_000, maxActive: 10_000, sessionSeconds: 600 };
  expect(
    (await putEvent(gw, eventId, eventInput({ onSaleAt, waitingRoom: { ...waitingRoom, drand: chain?.chain } })))
      .status,
  ).toBe(201);
  const joins = await Promise.all(
    Array.from({ length: fans }, (_, i) =>
      gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: `fan-${i}` } }),
    ),
  );
  expect(joins.every((r) => r.status === 201)).toBe(true);
  return { eventId, onSaleAt: at };
}

/** The room's fields, read straight from Redis: no script call, so nothing here moves the line. */
const room = (eventId: string, ...fields: string[]) => redis.hmget(`wr:{evt:${eventId}}:room`, ...fields);

describe("the draw job", () => {
  it("draws the pre-queue at onSaleAt with nobody asking", async () => {
    const { eventId } = await preQueued(4_000, 200);
    expect((await room(eventId, "drawn"))[0]).not.toBe("1");
    const drawn = () => room(eventId, "drawn").then((f) => f[0]);
    await pollUntil("the draw", drawn, (d) => d === "1", { timeoutMs: 30_000 });
    const [seed, preCount, membershipHash] = await room(eventId, "seed", "preCount", "membershipHash");
    expect(seed).toMatch(/^[0-9a-f]{64}$/);
    expect(preCount).toBe("200");
    expect(membershipHash).toMatch(/^[0-9a-f]{64}$/);
  }, 60_000);

  it("waits for its drand round, then draws with it", async () => {
    const chain = testChain();
    const { eventId, onSaleAt } = await preQueued(3_000, 40, chain);
    const beacon = (body: unknown) =>
      gw.request(`/v1/admin/events/${eventId}/waiting-room/beacon`, { method: "PUT", token: ADMIN_TOKEN, json: body });
    // Past the close (the job has run at least once and found the value missing) nothing is drawn.
    const drawn = () => room(eventId, "drawn").then((f) => f[0]);
    // Past the close (the job has run and found the value missing): closed, not drawn.
    await pollUntil(
      "the close",
      () => room(eventId, "openedAt").then((f) => Number(f[0] ?? 0)),
      (t) => t > 0,
      {
        timeoutMs: 30_000,
      },
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, onSaleAt + 2_000 - Date.now())));
    expect(await drawn()).not.toBe("1");
    const signed = chain.sign(roundAt(chain.chain, onSaleAt));
    expect((await beacon(signed)).status).toBe(200);
    await pollUntil("the draw", drawn, (d) => d === "1", { timeoutMs: 30_000 });
    expect((await room(eventId, "beacon"))[0]).toBe(randomnessOf(signed.signature));
  }, 60_000);
});
