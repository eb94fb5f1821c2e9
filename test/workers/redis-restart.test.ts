/**
 * BullMQ after Redis was killed and started again EMPTY: every job scheduler (sweeps, seat-map
 * refresh, reconcile backstop, outbox) was lost with the data. The gateway arms its events'
 * schedules again on the reconnect itself (src/workers/reschedule.ts), without waiting for a read
 * of the event, and the workers, reconnected by themselves, run the jobs: an expired hold is swept
 * and the seat-map cache is rebuilt with nobody asking.
 *
 * An in-process gateway with its workers, on a redis-server of this file's own.
 */
import {
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { killRedis } from "../support/redis-loss.js";
import { QUEUE_PREFIX, queueNames } from "../../src/workers/queues.js";
import { pollUntil } from "../support/worker-process.js";

let redis: SpawnedRedis;
let gw: Gateway;
const eventId = uniqueId("wr");

beforeAll(async () => {
  redis = await spawnRedis();
  gw = await startGateway({ tableName: await createTable(), redisUrl: redis.url, workers: true });
  // Long enough that the hold still counts as held when read back on a loaded machine (an
  // expired one is counted apart, in expiredHolds); the sweep then waits for it to expire.
  expect((await putEvent(gw, eventId, eventInput({ holdSeconds: 10 }))).status).toBe(201);
}, 120_000);

afterAll(async () => {
  await gw?.close();
  await redis?.close();
});

async function schedulerKeys(url: string): Promise<string[]> {
  const probe = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const names = [queueNames.sweep, queueNames.seatMapRefresh, queueNames.reconcile, queueNames.outbox];
    const found: string[] = [];
    for (const name of names) {
      if ((await probe.zcard(`${QUEUE_PREFIX}:${name}:repeat`)) > 0) found.push(name);
    }
    return found;
  } finally {
    probe.disconnect();
  }
}

describe("workers and job schedules after Redis restarted empty", () => {
  it("the schedules come back on the reconnect, and sweeps and cache refreshes run again", async () => {
    const all = [queueNames.sweep, queueNames.seatMapRefresh, queueNames.reconcile, queueNames.outbox];
    expect((await schedulerKeys(redis.url)).sort()).toEqual([...all].sort());

    await killRedis(redis, [gw]);
    const restartedAt = Date.now();
    redis = await spawnRedis({ port: redis.port });

    // No HTTP request in between: only the reconnect can arm them again.
    await pollUntil(
      "every job scheduler",
      () => schedulerKeys(redis.url),
      (found) => found.length === all.length,
      {
        timeoutMs: 90_000,
        intervalMs: 100,
      },
    );
    const armedMs = Date.now() - restartedAt;
    // The seat-map refresh ran (workers reconnected): the sections are cached again, unasked.
    await pollUntil(
      "section A cached again",
      () => gw.deps.seatMap.version(eventId, "A").catch(() => null),
      (version) => version !== null,
      { timeoutMs: 90_000, intervalMs: 100 },
    );
    const refreshedMs = Date.now() - restartedAt;

    // A hold that expires is swept (DynamoDB's stored status reset) by the re-armed sweeper.
    const [fan] = await admitFans(gw, eventId, ["sweepme"]);
    const held = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      json: { seats: ["A-3-1", "A-3-2"] },
      token: fan!.accessToken,
    });
    expect(held.status).toBe(201);
    const counts = async () => (await gw.deps.inventory.seats.eventCounts({ eventId }))?.seats;
    expect((await counts())?.held).toBe(2);
    await pollUntil("the expired hold swept", counts, (seats) => seats?.held === 0 && seats.expiredHolds === 0, {
      timeoutMs: 90_000,
      intervalMs: 250,
    });
    const sweptMs = Date.now() - restartedAt;
    console.log(`redis restart (workers): ${JSON.stringify({ armedMs, refreshedMs, sweptMs })}`);
  }, 240_000);
});
