/**
 * A script whose key count varies (join-batch-n.lua, shield-n, ...) on a Redis Cluster with the
 * gateway's own connection (auto-pipelining on). ioredis groups a custom command's auto-pipeline
 * by its first argument, which for such a script is the key count, not a key: the join then
 * shared a pipeline with commands for the node serving the slot of "8", and the whole pipeline
 * failed ("All keys in the pipeline should belong to the same slots allocation group",
 * redis/ioredis#2109): 14 of 300 joins answered 503 in a cluster spike, 59 with fan shards on.
 * src/redis/scripts.ts keeps such scripts out of auto-pipelining on a cluster.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { connectRedis } from "../../src/redis/connect.js";
import type { RedisClient } from "../../src/redis/scripts.js";
import { createWaitingRoom } from "../../src/waiting-room/index.js";
import { waitingRoomKeys } from "../../src/waiting-room/keys.js";
import {
  clusterClient,
  idsOnMasters,
  ownerOf,
  type SpawnedRedisCluster,
  spawnRedisCluster,
} from "../support/redis-cluster.js";
import { SECRET } from "../waiting-room/helpers.js";

let cluster: SpawnedRedisCluster | undefined;
let client: RedisClient | undefined;

beforeAll(async () => {
  cluster = await spawnRedisCluster({ masters: 3 });
}, 60_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.close();
});

it("joins (a variadic script) in the same tick as commands for another master all succeed", async () => {
  const admin = await clusterClient(cluster!);
  client = connectRedis({ kind: "cluster", nodes: cluster!.nodes }, "commands");
  await new Promise<void>((resolve, reject) => {
    client!.once("ready", () => resolve());
    client!.once("error", reject);
  });
  // join-batch-n.lua without an IP limit takes the line's 8 keys: ioredis hashes "8" for it.
  const countMaster = await ownerOf(admin, "8");
  const [evt] = await idsOnMasters(admin, {
    count: 1,
    make: () => `apl_${Math.random().toString(36).slice(2, 10)}`,
    keyOf: (id) => waitingRoomKeys(id).room,
    avoid: [countMaster],
  });
  let found = "";
  for (let i = 0; i < 10_000 && !found; i++) {
    const key = `plain:${i}`;
    if ((await ownerOf(admin, key)) === countMaster) found = key;
  }
  expect(found).not.toBe("");
  const room = createWaitingRoom({ redis: client, secret: SECRET, lineCache: false });
  try {
    const configured = await room.configure(evt!, {
      onSaleAt: new Date(Date.now() - 1_000).toISOString(),
      admitPerSecond: 0,
      maxActive: 10,
      sessionSeconds: 60,
    });
    expect(configured.ok).toBe(true);
    // Rounds of joins with plain commands for the count's master in the same tick.
    for (let round = 0; round < 5; round++) {
      const joins = Array.from({ length: 20 }, (_, i) => room.join(evt!, `f${round}-${i}`));
      const others = Array.from({ length: 20 }, () => client!.incr(found));
      const [joined] = await Promise.all([Promise.all(joins), Promise.all(others)]);
      for (const j of joined) expect(j.ok, JSON.stringify(j)).toBe(true);
    }
  } finally {
    await room.close();
    admin.disconnect();
  }
}, 60_000);
