/**
 * The gateway's Redis Function libraries (src/redis/functions.ts) on every master:
 *
 *   npm run redis:functions                # lists them: this version's, and other versions'
 *   npm run redis:functions -- --prune     # deletes the other versions' libraries
 *
 * Redis is REDIS_URL, or REDIS_CLUSTER_NODES (with REDIS_CLUSTER_PASSWORD, REDIS_CLUSTER_TLS) for a
 * cluster, as the gateway reads them. A library's name carries the hash of its text, so each
 * version of the gateway calls its own and a deploy leaves the last one's in Redis. Pruning is safe
 * during a rolling deploy: a gateway whose library was deleted loads it again at its next call of
 * that script (one extra round trip). Only libraries named `onsale_` are touched. Exit code 0, or 2
 * on bad usage or when Redis cannot be reached.
 */
import { parseArgs } from "node:util";
import type { Redis } from "ioredis";
import { redisTargetFromEnv } from "../src/config.js";
import { connectRedis } from "../src/redis/connect.js";
import { currentLibraryNames } from "../src/redis/scripts.js";

const PREFIX = "onsale_";

function usage(message: string): never {
  console.error(`${message}\nusage: npm run redis:functions [-- --prune]   (REDIS_URL or REDIS_CLUSTER_NODES)`);
  process.exit(2);
}

/** `FUNCTION LIST LIBRARYNAME onsale_` of one node: the names. */
async function librariesOn(node: Redis): Promise<string[]> {
  const listed = (await node.call("FUNCTION", "LIST", "LIBRARYNAME", `${PREFIX}*`)) as unknown[][];
  return listed.map((library) => String(library[1])).filter((name) => name.startsWith(PREFIX));
}

const { values } = parseArgs({ options: { prune: { type: "boolean", default: false } } });
let client: ReturnType<typeof connectRedis> | undefined;
try {
  const target = redisTargetFromEnv(process.env);
  if (!target) usage("REDIS_URL or REDIS_CLUSTER_NODES must name the gateway's Redis");
  client = connectRedis(target, "commands", { maxRetriesPerRequest: 1, lazyConnect: true });
  client.on("error", () => {});
  await client.connect().catch((err: Error) => {
    throw new Error(`cannot reach Redis: ${err.message}`);
  });
  const masters: Redis[] =
    target.kind === "cluster" ? (client as import("ioredis").Cluster).nodes("master") : [client as Redis];
  const current = currentLibraryNames();
  let pruned = 0;
  for (const node of masters) {
    const where = `${node.options.host}:${node.options.port}`;
    const names = (await librariesOn(node)).sort();
    const others = names.filter((name) => !current.has(name));
    console.log(`${where}: ${names.length - others.length} of this version, ${others.length} of others`);
    for (const name of others) {
      if (values.prune) {
        await node.call("FUNCTION", "DELETE", name);
        pruned++;
        console.log(`  deleted ${name}`);
      } else {
        console.log(`  other   ${name}`);
      }
    }
  }
  if (values.prune) console.log(`${pruned} deleted`);
  else if (masters.length > 0) console.log("(--prune deletes the other versions' libraries)");
} catch (err) {
  console.error(`redis:functions: ${(err as Error).message}`);
  process.exitCode = 2;
} finally {
  client?.disconnect();
}
