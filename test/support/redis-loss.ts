/**
 * Losing Redis for real, for the tests that check what the gateway does without it: SIGKILL the
 * test's own redis-server (nothing is persisted), wait until the given gateways see it down on
 * /readyz (`checks.redis`, degraded: they stay ready); later start an empty one on the same port and wait until they see it back.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";

interface Probed {
  request(path: string): Promise<Response> | Response;
}

/** What /readyz says of Redis: `ok`, or `down` (degraded: the gateway stays ready without Redis). */
export async function redisCheckOf(res: Response): Promise<string | undefined> {
  const body = (await res.json().catch(() => ({}))) as {
    checks?: { redis?: string };
    error?: { details?: { checks?: { redis?: string } } };
  };
  return body.checks?.redis ?? body.error?.details?.checks?.redis;
}

async function untilRedis(gateways: readonly Probed[], state: "ok" | "down", timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const gw of gateways) {
    for (;;) {
      if ((await redisCheckOf(await gw.request("/readyz"))) === state) break;
      if (Date.now() > deadline) throw new Error(`/readyz did not report Redis ${state} within ${timeoutMs} ms`);
      await sleep(50);
    }
  }
}

/** SIGKILLs `redis` and resolves once every gateway's /readyz reports Redis down. */
export async function killRedis(redis: SpawnedRedis, gateways: readonly Probed[], timeoutMs = 60_000): Promise<void> {
  const exited = new Promise((resolve) => redis.child.once("exit", resolve));
  redis.child.kill("SIGKILL");
  await exited;
  await untilRedis(gateways, "down", timeoutMs);
}

/** Starts an empty redis-server on `port` and resolves once every gateway's /readyz reports Redis ok. */
export async function restartRedis(port: number, gateways: readonly Probed[], timeoutMs = 120_000) {
  const redis = await spawnRedis({ port });
  await untilRedis(gateways, "ok", timeoutMs);
  return redis;
}
