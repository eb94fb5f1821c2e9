/**
 * The operator's figures while Redis is down (a redis-server of the test's own, stopped): the
 * stats route still answers the authoritative counts, each gateway counting alone at most once per
 * interval (`counts.source: "process"`), and the history route answers 503 with the JSON error
 * body and Retry-After, never a 500.
 */
import { afterAll, describe, expect, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { ADMIN_TOKEN, createTable, putEvent, uniqueId } from "../gateway/harness.js";
import { type CountedGateway, startCountedGateway } from "./support.js";

let redis: SpawnedRedis | undefined;
let gw: CountedGateway | undefined;

afterAll(async () => {
  await gw?.close();
  await redis?.close();
});

describe("with Redis down", () => {
  it("stats count alone, once per interval; the history is 503", async () => {
    redis = await spawnRedis();
    gw = startCountedGateway(await createTable(), { countsIntervalMs: 120_000 }, { kind: "server", url: redis.url });
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    await redis.close();
    await expect.poll(() => gw!.deps.clients.redis.status, { timeout: 10_000 }).not.toBe("ready");

    gw.resetReads();
    const first = await gw.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN });
    expect(first.status).toBe(200);
    const body = (await first.json()) as {
      seats: { total: number };
      counts: { source: string };
      waitingRoom: { state: string };
    };
    expect(body).toMatchObject({
      seats: { total: 70 },
      counts: { source: "process" },
      waitingRoom: { state: "unavailable" },
    });
    expect(gw.reads.seatQueries).toBe(2);
    // Within the interval this gateway answers its own snapshot: no seat read again.
    const again = await Promise.all(
      Array.from({ length: 10 }, () => gw!.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN })),
    );
    expect(again.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(gw.reads.seatQueries).toBe(2);

    const history = await gw.request(`/v1/admin/events/${eventId}/stats/history`, { token: ADMIN_TOKEN });
    expect(history.status).toBe(503);
    expect(history.headers.get("retry-after")).toBe("1");
    expect(((await history.json()) as { error: { code: string } }).error.code).toBe("unavailable");
    // The sampler, ticking meanwhile, records nothing and throws nothing.
    expect(await gw.deps.stats.sampler.tick()).toBe(0);
  }, 60_000);
});
