/**
 * Losing Redis for real, for the tests that check what the gateway does without it: SIGKILL the
 * test's own redis-server (nothing is persisted), wait until the given gateways see it down on
 * /readyz; later start an empty one on the same port and wait until they see it back.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";

interface Probed {
  request(path: string): Promise<Response> | Response;
}

async function untilReady(gateways: readonly Probed[], status: 200 | 503, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const gw of gateways) {
    for (;;) {
      if ((await gw.request("/readyz")).status === status) break;
      if (Date.now() > deadline) throw new Error(`/readyz did not answer ${status} within ${timeoutMs} ms`);
      await sleep(50);
    }
  }
}

/** SIGKILLs `redis` and resolves once every gateway's /readyz answers 503. */
export async function killRedis(redis: SpawnedRedis, gateways: readonly Probed[], timeoutMs = 60_000): Promise<void> {
  const exited = new Promise((resolve) => redis.child.once("exit", resolve));
  redis.child.kill("SIGKILL");
  await exited;
  await untilReady(gateways, 503, timeoutMs);
}

/** Starts an empty redis-server on `port` and resolves once every gateway's /readyz answers 200. */
export async function restartRedis(port: number, gateways: readonly Probed[], timeoutMs = 120_000) {
  const redis = await spawnRedis({ port });
  await untilReady(gateways, 200, timeoutMs);
  return redis;
}
