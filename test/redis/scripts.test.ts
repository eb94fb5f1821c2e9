/** The one Lua loader: file names, includes, the per-call key-count check and the code tables. */
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { paymentScripts } from "../../src/payments/codes.js";
import {
  codeTable,
  familyScripts,
  luaDir,
  readScript,
  registerScripts,
  scriptFamily,
  UnknownScriptCode,
} from "../../src/redis/scripts.js";
import { WAITING_ROOM_CODES } from "../../src/waiting-room/codes.js";
import { waitingRoomScripts } from "../../src/waiting-room/scripts.js";

/** Every script file under lua/ (includes are not scripts), as `dir/name-keys`. */
function scriptFiles(dir = luaDir): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return entry === "includes" ? [] : scriptFiles(path);
    return entry.endsWith(".lua") ? [relative(luaDir, path).replace(/\.lua$/, "")] : [];
  });
}

describe("script files", () => {
  const files = scriptFiles();

  it("are all named <name>-<keys>, with every include inlined and no key built inside Lua", () => {
    expect(files.length).toBeGreaterThanOrEqual(17);
    for (const file of files) {
      const script = readScript(file);
      expect(file).toMatch(/-(\d+|n)$/);
      expect(script.lua, file).not.toMatch(/^--- @include/m);
      expect(script.lua, file).not.toMatch(/\.\.\s*['"]:?\{?evt/);
    }
  });

  it("give every script its own command name", () => {
    const commands = files.map((file) => readScript(file).command);
    expect(new Set(commands).size).toBe(commands.length);
    expect(readScript("waiting-room/update-settings-9").command).toBe("waitingRoomUpdateSettings");
    expect(readScript("shield-n").numberOfKeys).toBeUndefined();
  });
  it("read Redis time only through the one shared include, inlined once per script", () => {
    const clock = "local function now_ms()\n  local t = redis.call('TIME')";
    let timed = 0;
    for (const file of files) {
      const { lua } = readScript(file);
      const reads = lua.match(/= redis\.call\('TIME'\)/g) ?? [];
      expect(reads.length, file).toBeLessThanOrEqual(1);
      if (reads.length === 1) {
        expect(lua, file).toContain(clock);
        timed++;
      }
    }
    expect(timed).toBeGreaterThanOrEqual(8);
  });

  it("inline each include once, whoever names it", () => {
    const { lua } = readScript(waitingRoomScripts.files.status);
    for (const fn of ["now_ms", "load_room", "get_fan", "admit", "tick", "fan_view", "take_token"]) {
      expect(lua.match(new RegExp(`^local function ${fn}\\(`, "gm")), fn).toHaveLength(1);
    }
  });
});

describe("registerScripts", () => {
  // Never connected: a call refused by the key-count check sends nothing.
  const redis = new Redis({ lazyConnect: true, enableOfflineQueue: false });
  afterAll(() => redis.disconnect());

  it("refuses a call with the wrong number of keys before sending it", async () => {
    const run = registerScripts(redis, waitingRoomScripts);
    await expect(run("sessionActive", ["only-one-key"], ["s", "", "strict"])).rejects.toThrow(
      "sessionActive takes 3 keys, was given 1",
    );
    expect(redis.status).toBe("wait");
  });

  it("defines each command once per client, whichever family registers first", () => {
    registerScripts(redis, paymentScripts);
    const before = (redis as unknown as Record<string, unknown>).paymentCharge;
    registerScripts(redis, scriptFamily({ name: "again", files: { charge: "payment-charge-4" } }));
    expect((redis as unknown as Record<string, unknown>).paymentCharge).toBe(before);
  });

  it("runs a family's script on a real Redis through EVALSHA", async () => {
    const live = new Redis("redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
    try {
      const run = registerScripts(live, waitingRoomScripts);
      const room = `wr:{evt:loader_${process.pid}_${Date.now()}}:room`;
      const active = room.replace(/:room$/, ":active");
      const fans = room.replace(/:room$/, ":fans");
      expect(await run("sessionActive", [room, active, fans], ["s1", "e1", "epoch"])).toBe(3); // no room
      expect(await run("sessionActive", [room, active, fans], ["s1", "", "strict"])).toBe(0);
    } finally {
      live.disconnect();
    }
  });

  it("lists a family's scripts with their key counts", () => {
    expect(familyScripts(paymentScripts).map((s) => [s.name, s.numberOfKeys])).toEqual([
      ["charge", 4],
      ["refund", 2],
    ]);
  });
});

describe("codeTable", () => {
  const table = codeTable("test", { 1: "done", [-1]: "missing" });

  it("names each code and refuses one it does not know", () => {
    expect(table.outcome(1)).toBe("done");
    expect(table.outcome(-1)).toBe("missing");
    expect(() => table.outcome(-9)).toThrow(UnknownScriptCode);
    expect(() => table.outcome("1")).toThrow(UnknownScriptCode);
  });

  it("refuses a table where two codes mean the same", () => {
    expect(() => codeTable("bad", { 1: "same", 2: "same" })).toThrow();
  });

  it("gives the waiting room's codes one meaning each", () => {
    expect(WAITING_ROOM_CODES.outcome(-1)).toBe("not_found");
    expect(WAITING_ROOM_CODES.outcome(3)).toBe("no_room");
  });
});
