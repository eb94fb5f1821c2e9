/**
 * The waiting room's Lua scripts, registered in one place. Each script is a file in
 * lua/waiting-room/ named `<name>-<numberOfKeys>.lua`, read by src/redis/scripts.ts (which also
 * inlines lua/waiting-room/includes/). Registered here with a key-count check on every call.
 */
import { fileURLToPath } from "node:url";
import type { Cluster, Redis } from "ioredis";
import { readScript } from "../redis/scripts.js";

export const DEFAULT_LUA_DIR = fileURLToPath(new URL("../../lua/waiting-room/", import.meta.url));

const FILES = {
  configure: "configure-9.lua",
  join: "join-9.lua",
  status: "status-10.lua",
  snapshot: "snapshot-8.lua",
  updateSettings: "update-settings-9.lua",
  openNow: "open-now-9.lua",
  endSession: "end-session-8.lua",
  lotteryPage: "lottery-page-8.lua",
  sessionActive: "session-active-2.lua",
} as const;

const READ_ONLY: ReadonlySet<ScriptName> = new Set(["sessionActive"]);

export type ScriptName = keyof typeof FILES;

export interface LoadedScript {
  name: ScriptName;
  /** The ioredis command name, prefixed so it cannot clash with other modules' scripts. */
  command: string;
  numberOfKeys: number;
  lua: string;
  readOnly: boolean;
}

/** Raw reply of a script: a negative code or a list (see each script's header). */
export type ScriptReply = unknown;

export type RunScript = (
  name: ScriptName,
  keys: readonly string[],
  args?: readonly (string | number)[],
) => Promise<ScriptReply>;

const loadedByDir = new Map<string, readonly LoadedScript[]>();

/** Reads and expands every script once per directory; later calls reuse the result. */
export function loadScripts(dir: string = DEFAULT_LUA_DIR): readonly LoadedScript[] {
  const cached = loadedByDir.get(dir);
  if (cached) return cached;
  const scripts = (Object.entries(FILES) as [ScriptName, string][]).map(([name, file]) => {
    const { numberOfKeys, lua } = readScript(file.replace(/\.lua$/, ""), dir);
    if (numberOfKeys === undefined) throw new Error(`script file ${file} does not carry its key count`);
    return {
      name,
      command: `waitingRoom${name[0]?.toUpperCase()}${name.slice(1)}`,
      numberOfKeys,
      lua,
      readOnly: READ_ONLY.has(name),
    };
  });
  loadedByDir.set(dir, scripts);
  return scripts;
}

type ScriptMethod = (...args: (string | number)[]) => Promise<ScriptReply>;

/**
 * Defines the commands on `redis` (idempotent: ioredis replaces a definition with the same
 * source) and returns a runner that checks the key count of every call.
 */
export function registerScripts(redis: Redis | Cluster, dir: string = DEFAULT_LUA_DIR): RunScript {
  const scripts = new Map<ScriptName, LoadedScript>();
  for (const script of loadScripts(dir)) {
    redis.defineCommand(script.command, {
      lua: script.lua,
      numberOfKeys: script.numberOfKeys,
      readOnly: script.readOnly,
    });
    scripts.set(script.name, script);
  }
  const methods = redis as unknown as Record<string, ScriptMethod | undefined>;
  return (name, keys, args = []) => {
    const script = scripts.get(name);
    if (!script) return Promise.reject(new Error(`unknown waiting-room script ${name}`));
    if (keys.length !== script.numberOfKeys) {
      return Promise.reject(new Error(`${name} takes ${script.numberOfKeys} keys, was given ${keys.length}`));
    }
    const method = methods[script.command];
    if (!method) return Promise.reject(new Error(`command ${script.command} is not defined`));
    return method.call(redis, ...keys, ...args);
  };
}
