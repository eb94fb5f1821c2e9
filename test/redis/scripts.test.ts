/** The one Lua loader: file names, includes, the per-call key-count check and the code tables. */
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { paymentScripts } from "../../src/payments/codes.js";
import {
  codeTable,
  dropUnusedFunctions,
  familyScripts,
  readScript,
  registerScripts,
  scriptFileNames,
  scriptFamily,
  UnknownScriptCode,
} from "../../src/redis/scripts.js";
import { WAITING_ROOM_CODES } from "../../src/waiting-room/codes.js";
import { waitingRoomScripts } from "../../src/waiting-room/scripts.js";

/** Every script file under lua/ (includes are not scripts), as `dir/name-keys`. */

describe("script files", () => {
  const files = scriptFileNames();

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

describe("functions a script never calls", () => {
  const fixture = [
    "--[[",
    "  Defines  used(), chained(), lonely(), noted()   (a header naming every function)",
    "]]",
    "local function chained(x)",
    "  return x + 1",
    "end",
    "",
    "local function only_by_lonely(x)",
    "  -- used() is named in this comment only",
    "  return chained(x)",
    "end",
    "",
    "local function lonely()",
    "  return only_by_lonely(1)",
    "end",
    "",
    "local function used(x)",
    "  if x then",
    "    return 2",
    "  end",
    "  return 1",
    "end",
    "",
    "local function in_trailing_comment()",
    "  return 3",
    "end",
    "",
    "local function one_line() return 4 end",
    "",
    "local function flat()",
    "return 5",
    "end",
    "",
    "-- noted() is only in a comment",
    "local function noted()",
    "  return 6",
    "end",
    "",
    "return used(true) -- in_trailing_comment() is kept: a comment after code counts as code",
  ].join("\n");
  const shaken = dropUnusedFunctions(fixture);
  const defined = (lua: string) => [...lua.matchAll(/^local function (\w+)/gm)].map((m) => m[1]);

  it("drops every function nothing calls, and those only a dropped one called", () => {
    expect(defined(shaken)).toEqual(["used", "in_trailing_comment", "one_line", "flat"]);
    expect(shaken).toContain("-- (function lonely dropped: this script never calls it)");
    expect(shaken).toContain("-- (function chained dropped: this script never calls it)");
    expect(shaken).toContain("-- (function only_by_lonely dropped: this script never calls it)");
    expect(shaken).toContain("-- (function noted dropped: this script never calls it)");
    // the rest is untouched, line for line: each dropped block is one comment line in its place
    const blocks: Record<string, [number, number]> = {
      chained: [3, 5],
      only_by_lonely: [7, 10],
      lonely: [12, 14],
      noted: [34, 36],
    };
    const expected = fixture.split("\n").flatMap((line, i) => {
      for (const [name, [from, to]] of Object.entries(blocks)) {
        if (i === from) return [`-- (function ${name} dropped: this script never calls it)`];
        if (i > from && i <= to) return [];
      }
      return [line];
    });
    expect(shaken.split("\n")).toEqual(expected);
  });

  it("keeps a block it cannot bound for certain: a one-line function, a body not indented", () => {
    expect(defined(dropUnusedFunctions("local function a() return 1 end\nreturn 2"))).toEqual(["a"]);
    expect(defined(dropUnusedFunctions("local function a()\nreturn 1\nend\nreturn 2"))).toEqual(["a"]);
  });

  it("leaves every script compiling on a real Redis, with what it calls", async () => {
    const live = new Redis("redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
    try {
      for (const file of scriptFileNames()) {
        const { lua } = readScript(file);
        expect(String(await live.script("LOAD", lua)), file).toMatch(/^[0-9a-f]{40}$/);
      }
    } finally {
      live.disconnect();
    }
    const status = readScript(waitingRoomScripts.files.status).lua;
    expect(defined(status)).toEqual(expect.arrayContaining(["load_room", "tick", "fan_view", "take_token"]));
    expect(defined(status)).not.toContain("snapshot"); // views.lua's, for the operator's scripts
    expect(status).toContain("-- (function snapshot dropped: this script never calls it)");
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

  it("defines nothing on the client: ioredis would copy each script onto every pipeline it builds", () => {
    registerScripts(redis, paymentScripts);
    registerScripts(redis, scriptFamily({ name: "again", files: { charge: "payment-charge-4" } }));
    expect(Object.keys((redis as unknown as { scriptsSet: object }).scriptsSet)).toEqual([]);
    expect((redis as unknown as Record<string, unknown>).paymentCharge).toBeUndefined();
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
