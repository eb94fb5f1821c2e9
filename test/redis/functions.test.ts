/**
 * The scripts as Redis Functions (src/redis/functions.ts, registerScripts in src/redis/scripts.ts):
 * every script's library loads on a real Redis, a family is loaded once per server however many
 * first calls race, a server that lost its libraries is given them again, a server without
 * FUNCTION (an older Redis) and REDIS_FUNCTIONS=false run EVALSHA, and a cluster's masters each
 * get the libraries they serve.
 */
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedRedis, type SpawnedRedisCluster, spawnRedis, spawnRedisCluster } from "../../src/local/redis.js";
import { buildLibrary } from "../../src/redis/functions.js";
import {
  dropUnusedFunctions,
  familyScripts,
  loadScriptLibraries,
  readScript,
  registerScripts,
  scriptFileNames,
  useRedisFunctions,
} from "../../src/redis/scripts.js";
import { waitingRoomScripts } from "../../src/waiting-room/scripts.js";
import { runToExit } from "../support/processes.js";
import { monitorRedis } from "../support/redis-monitor.js";

/** The commands a server received while `fn` ran (MONITOR, closed after a marker is seen). */
async function commandsDuring(url: string, fn: () => Promise<void>): Promise<string[][]> {
  // A plain socket, not ioredis' monitor() (test/support/redis-monitor.ts).
  const monitor = await monitorRedis(url);
  const seen: string[][] = [];
  const marker = `marker-${Math.random()}`;
  let resolveMarker: () => void = () => {};
  const markerSeen = new Promise<void>((resolve) => {
    resolveMarker = resolve;
  });
  monitor.on(({ args, source }) => {
    if (args[1] === marker) resolveMarker();
    else if (!source.startsWith("lua")) seen.push(args);
  });
  const admin = new Redis(url);
  try {
    await fn();
    await admin.echo(marker);
    await markerSeen;
    return seen;
  } finally {
    admin.disconnect();
    monitor.close();
  }
}

const named = (commands: string[][], name: string) => commands.filter((c) => c[0]?.toLowerCase() === name);
/** `FUNCTION LOAD`s among the commands. */
const loads = (commands: string[][]) => named(commands, "function").filter((c) => c[1]?.toLowerCase() === "load");

/** Keys of the session-active script (3 keys) for a room nobody created: it answers 3 (no room). */
const sessionKeys = (tag: string) => [`wr:{evt:${tag}}:room`, `wr:{evt:${tag}}:active`, `wr:{evt:${tag}}:fans`];

let server: SpawnedRedis;
beforeAll(async () => {
  // On whatever REDIS_FUNCTIONS says for the rest of the suite (test/setup-scripts.ts).
  useRedisFunctions(true);
  server = await spawnRedis();
}, 30_000);
afterAll(async () => {
  await server?.close();
});

describe("a script's library", () => {
  it("loads for every script file, its functions made once at the load", async () => {
    const redis = new Redis(server.url);
    try {
      const files = scriptFileNames();
      for (const file of files) {
        const script = readScript(file);
        const library = buildLibrary(script.command, script.includes, script.body, false, dropUnusedFunctions);
        expect(library.name).toMatch(/^onsale_[A-Za-z0-9]+_[0-9a-f]{16}$/);
        await expect(redis.call("FUNCTION", "LOAD", library.code), file).resolves.toBe(library.name);
      }
      const listed = (await redis.call("FUNCTION", "LIST")) as unknown[][];
      expect(listed.length).toBe(files.length);
    } finally {
      await redis.call("FUNCTION", "FLUSH");
      redis.disconnect();
    }
  });

  it("assigns an include's locals that read KEYS or ARGV at each call, and keeps its constants from the load", async () => {
    const includes = [
      "local A, B =",
      "  KEYS[1], ARGV[1]",
      "local C = { x = 'kept' }",
      "local function joined()",
      "  return A .. '/' .. B",
      "end",
      "local function unused()",
      "  return 'never called'",
      "end",
    ].join("\n");
    const library = buildLibrary("probe", includes, "return { joined(), C.x }", false, dropUnusedFunctions);
    expect(library.code).toContain("local A, B\n");
    expect(library.code).toContain("(function unused dropped: this script never calls it)");
    // The name follows the text: another body, another library.
    expect(buildLibrary("probe", includes, "return 1", false, dropUnusedFunctions).name).not.toBe(library.name);
    const redis = new Redis(server.url);
    try {
      await redis.call("FUNCTION", "LOAD", library.code);
      expect(await redis.fcall(library.name, 1, "k1", "a1")).toEqual(["k1/a1", "kept"]);
      expect(await redis.fcall(library.name, 1, "k2", "a2")).toEqual(["k2/a2", "kept"]);
      // A read-only script is flagged so (FCALL_RO, a replica may run it); a write inside refuses.
      const readOnly = buildLibrary("probe", "", "return redis.call('SET', KEYS[1], 'x')", true, dropUnusedFunctions);
      await redis.call("FUNCTION", "LOAD", readOnly.code);
      await expect(redis.fcall_ro(readOnly.name, 1, "k3")).rejects.toThrow(/write/i);
    } finally {
      await redis.call("FUNCTION", "FLUSH");
      redis.disconnect();
    }
  });
});

describe("registerScripts with Redis Functions", () => {
  it("loads a script once however many first calls race, then calls it with FCALL; the reply is EVALSHA's", async () => {
    const redis = new Redis(server.url);
    const plain = new Redis(server.url);
    try {
      const run = registerScripts(redis, waitingRoomScripts);
      const commands = await commandsDuring(server.url, async () => {
        const replies = await Promise.all(
          Array.from({ length: 50 }, (_, i) => run("sessionActive", sessionKeys(`fnrace${i}`), ["s", "e", "epoch"])),
        );
        expect(replies).toEqual(Array.from({ length: 50 }, () => 3));
      });
      expect(loads(commands).length).toBe(1);
      expect(named(commands, "fcall_ro").length).toBe(50);
      expect(named(commands, "evalsha").length).toBe(0);
      // The same script through EVALSHA answers the same.
      useRedisFunctions(false);
      const viaEval = registerScripts(plain, waitingRoomScripts);
      useRedisFunctions(true);
      const evalCommands = await commandsDuring(server.url, async () => {
        expect(await viaEval("sessionActive", sessionKeys("fnrace0"), ["s", "e", "epoch"])).toBe(3);
        expect(await viaEval("sessionActive", sessionKeys("fnrace0"), ["s", "", "strict"])).toBe(0);
        expect(await run("sessionActive", sessionKeys("fnrace0"), ["s", "", "strict"])).toBe(0);
      });
      expect(evalCommands.map((c) => c[0]?.toLowerCase()).sort()).toEqual(
        // the first EVALSHA of a script the server has not seen fails NOSCRIPT, then EVAL
        expect.arrayContaining(["evalsha", "fcall_ro"]),
      );
      expect(loads(evalCommands)).toEqual([]);
    } finally {
      await redis.call("FUNCTION", "FLUSH");
      redis.disconnect();
      plain.disconnect();
    }
  });

  it("loads a library again when the server lost it (a restart without its data), once for every call that found it missing", async () => {
    const redis = new Redis(server.url);
    try {
      const run = registerScripts(redis, waitingRoomScripts);
      expect(await run("sessionActive", sessionKeys("fnlost"), ["s", "e", "epoch"])).toBe(3);
      await redis.call("FUNCTION", "FLUSH");
      const commands = await commandsDuring(server.url, async () => {
        const replies = await Promise.all(
          Array.from({ length: 20 }, () => run("sessionActive", sessionKeys("fnlost"), ["s", "e", "epoch"])),
        );
        expect(replies).toEqual(Array.from({ length: 20 }, () => 3));
      });
      expect(loads(commands).length).toBe(1);
      // 20 that found it missing, 20 again after the load
      expect(named(commands, "fcall_ro").length).toBe(40);
    } finally {
      await redis.call("FUNCTION", "FLUSH");
      redis.disconnect();
    }
  });

  it("loads every registered library at start (loadScriptLibraries), so the first calls run FCALL at once", async () => {
    const redis = new Redis(server.url);
    try {
      const run = registerScripts(redis, waitingRoomScripts);
      const libraries = familyScripts(waitingRoomScripts).length;
      const commands = await commandsDuring(server.url, async () => {
        expect(await loadScriptLibraries(redis)).toEqual({ mode: "functions", loaded: libraries, failed: 0 });
      });
      expect(loads(commands).length).toBe(libraries);
      const listed = (await redis.call("FUNCTION", "LIST")) as unknown[][];
      expect(listed.length).toBe(libraries);
      // The first calls after it load nothing: FCALL straight away.
      const calls = await commandsDuring(server.url, async () => {
        const replies = await Promise.all(
          Array.from({ length: 10 }, (_, i) => run("sessionActive", sessionKeys(`fnpre${i}`), ["s", "e", "epoch"])),
        );
        expect(replies).toEqual(Array.from({ length: 10 }, () => 3));
      });
      expect(loads(calls)).toEqual([]);
      expect(named(calls, "fcall_ro").length).toBe(10);
      // Loading again costs no command: every library is loaded on this client already.
      const again = await commandsDuring(server.url, async () => {
        await loadScriptLibraries(redis);
      });
      expect(loads(again)).toEqual([]);
    } finally {
      await redis.call("FUNCTION", "FLUSH");
      redis.disconnect();
    }
  });

  it("loads nothing at start with REDIS_FUNCTIONS off, and reports a Redis that is away without failing", async () => {
    useRedisFunctions(false);
    const off = new Redis(server.url);
    try {
      registerScripts(off, waitingRoomScripts);
      expect(await loadScriptLibraries(off)).toEqual({ mode: "evalsha", loaded: 0, failed: 0 });
    } finally {
      useRedisFunctions(true);
      off.disconnect();
    }
    // A port nobody listens on: every load fails, and the call still resolves.
    const away = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    try {
      registerScripts(away, waitingRoomScripts);
      const libraries = familyScripts(waitingRoomScripts).length;
      expect(await loadScriptLibraries(away)).toEqual({ mode: "functions", loaded: 0, failed: libraries });
    } finally {
      away.disconnect();
    }
  });

  it("runs EVALSHA with REDIS_FUNCTIONS off, and loads nothing", async () => {
    useRedisFunctions(false);
    const redis = new Redis(server.url);
    try {
      const run = registerScripts(redis, waitingRoomScripts);
      const commands = await commandsDuring(server.url, async () => {
        expect(await run("sessionActive", sessionKeys("fnoff"), ["s", "e", "epoch"])).toBe(3);
        expect(await run("sessionActive", sessionKeys("fnoff"), ["s", "e", "epoch"])).toBe(3);
      });
      expect(loads(commands)).toEqual([]);
      expect(named(commands, "fcall_ro")).toEqual([]);
      // EVALSHA each time, and EVAL once when this server had not cached the script yet
      expect(named(commands, "evalsha")).toHaveLength(2);
      expect(named(commands, "eval").length).toBeLessThanOrEqual(1);
    } finally {
      useRedisFunctions(true);
      redis.disconnect();
    }
  });
});

describe("npm run redis:functions", () => {
  const cli = (args: string[], env: Record<string, string>) =>
    runToExit("scripts/redis-functions.ts", args, { ...process.env, REDIS_CLUSTER_NODES: "", ...env });

  it("lists this version's libraries and others', and prunes only the others", async () => {
    const redis = new Redis(server.url);
    try {
      const run = registerScripts(redis, waitingRoomScripts);
      expect(await run("sessionActive", sessionKeys("fncli"), ["s", "e", "epoch"])).toBe(3);
      const old = "onsale_waitingRoomSessionActive_0000000000000000";
      await redis.call(
        "FUNCTION",
        "LOAD",
        `#!lua name=${old}\nredis.register_function('${old}', function() return 1 end)`,
      );
      await redis.call(
        "FUNCTION",
        "LOAD",
        "#!lua name=theirs\nredis.register_function('theirs', function() return 1 end)",
      );
      const listed = await cli([], { REDIS_URL: server.url });
      expect(listed.code).toBe(0);
      expect(listed.out).toContain("1 of this version, 1 of others");
      expect(listed.out).toContain(`other   ${old}`);
      const pruned = await cli(["--prune"], { REDIS_URL: server.url });
      expect(pruned.code).toBe(0);
      expect(pruned.out).toContain(`deleted ${old}`);
      const left = ((await redis.call("FUNCTION", "LIST")) as unknown[][]).map((lib) => String(lib[1])).sort();
      // this version's kept, and a library not the gateway's never touched
      expect(left).toHaveLength(2);
      expect(left).toContain("theirs");
      expect(left.find((name) => name !== "theirs")).toMatch(/^onsale_waitingRoomSessionActive_(?!0{16})/);
      // and still called as before
      expect(await run("sessionActive", sessionKeys("fncli"), ["s", "", "strict"])).toBe(0);
      expect((await cli([], { REDIS_URL: "" })).code).toBe(2);
    } finally {
      await redis.call("FUNCTION", "FLUSH");
      redis.disconnect();
    }
  });
});

describe("a server without FUNCTION (as Redis before 7)", () => {
  let old: SpawnedRedis;
  beforeAll(async () => {
    old = await spawnRedis({ extraArgs: ["--rename-command", "FUNCTION", ""] });
  }, 30_000);
  afterAll(async () => {
    await old?.close();
  });

  it("runs every script through EVALSHA once its first load is refused", async () => {
    const redis = new Redis(old.url);
    try {
      const run = registerScripts(redis, waitingRoomScripts);
      const commands = await commandsDuring(old.url, async () => {
        const replies = await Promise.all(
          Array.from({ length: 10 }, () => run("sessionActive", sessionKeys("fnold"), ["s", "e", "epoch"])),
        );
        expect(replies).toEqual(Array.from({ length: 10 }, () => 3));
        expect(await run("sessionActive", sessionKeys("fnold"), ["s", "", "strict"])).toBe(0);
      });
      expect(named(commands, "fcall_ro")).toEqual([]);
      expect(named(commands, "evalsha").length + named(commands, "eval").length).toBeGreaterThanOrEqual(11);
    } finally {
      redis.disconnect();
    }
  });
});

describe("a client whose ACL user may not load libraries", () => {
  it("runs its scripts through EVALSHA", async () => {
    const admin = new Redis(server.url);
    await admin.call("ACL", "SETUSER", "noload", "on", "nopass", "~*", "&*", "+@all", "-function");
    const redis = new Redis(server.url, { username: "noload", password: "unused" });
    try {
      const run = registerScripts(redis, waitingRoomScripts);
      const replies = await Promise.all(
        Array.from({ length: 5 }, () => run("sessionActive", sessionKeys("fnacl"), ["s", "e", "epoch"])),
      );
      expect(replies).toEqual([3, 3, 3, 3, 3]);
      expect(await admin.call("FUNCTION", "LIST")).toEqual([]);
    } finally {
      redis.disconnect();
      await admin.call("ACL", "DELUSER", "noload");
      admin.disconnect();
    }
  });
});

describe("on a 3-master cluster", () => {
  let cluster: SpawnedRedisCluster;
  beforeAll(async () => {
    cluster = await spawnRedisCluster({ masters: 3 });
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it("loads each library on every master, and again on a master that lost it", async () => {
    const client = new Cluster(
      cluster.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
      {
        enableAutoPipelining: true,
      },
    );
    try {
      // Until the client has read the slots it knows no master to load on: the calls made before
      // go through EVALSHA (queued as any command), and the first one after loads.
      await new Promise((resolve) => client.once("ready", resolve));
      const run = registerScripts(client, waitingRoomScripts);
      // Rooms on every master (their tags spread over the slots), all at once.
      const tags = Array.from({ length: 30 }, (_, i) => `fncl${i}`);
      const first = await Promise.all(tags.map((tag) => run("sessionActive", sessionKeys(tag), ["s", "e", "epoch"])));
      expect(first).toEqual(tags.map(() => 3));
      const masters = client.nodes("master");
      expect(masters.length).toBe(3);
      const named = async (node: Redis) =>
        ((await node.call("FUNCTION", "LIST")) as unknown[][]).map((lib) => String(lib[1]));
      for (const node of masters)
        expect(await named(node)).toEqual([expect.stringMatching(/^onsale_waitingRoomSessionActive_/)]);
      // One master loses its libraries: the calls it serves load them there again.
      await masters[1]!.call("FUNCTION", "FLUSH");
      const again = await Promise.all(tags.map((tag) => run("sessionActive", sessionKeys(tag), ["s", "", "strict"])));
      expect(again).toEqual(tags.map(() => 0));
      expect((await named(masters[1]!)).length).toBe(1);
    } finally {
      client.disconnect();
    }
  });
  it("loads on the masters that answer when one hangs: the other masters' events go on", async () => {
    const client = new Cluster(
      cluster.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
      { enableAutoPipelining: true, maxRedirections: 2, retryDelayOnClusterDown: 50 },
    );
    client.on("error", () => {});
    try {
      await new Promise((resolve) => client.once("ready", resolve));
      const run = registerScripts(client, waitingRoomScripts);
      // Rooms on every master, and which master serves each.
      const tags = Array.from({ length: 30 }, (_, i) => `fndown${i}`);
      const ownerOf = async (tag: string) => {
        const slot = Number(await client.call("CLUSTER", "KEYSLOT", sessionKeys(tag)[0]!));
        return (client.slots[slot] ?? [])[0];
      };
      const owners = await Promise.all(tags.map(ownerOf));
      const down = cluster.masters[2]!;
      const downAt = `127.0.0.1:${down.port}`;
      expect(owners).toContain(downAt);
      for (const node of client.nodes("master")) await node.call("FUNCTION", "FLUSH");
      // Stopped, not closed: its connection stays open and nothing it is sent is answered.
      down.child.kill("SIGSTOP");
      // Not loaded anywhere, one master hanging: the first calls load it on the two that answer.
      const up = tags.filter((_, i) => owners[i] !== downAt);
      expect(up.length).toBeGreaterThan(0);
      const replies = await Promise.all(up.map((tag) => run("sessionActive", sessionKeys(tag), ["s", "e", "epoch"])));
      expect(replies).toEqual(up.map(() => 3));
    } finally {
      cluster.masters[2]!.child.kill("SIGCONT");
      client.disconnect();
    }
  });
});
