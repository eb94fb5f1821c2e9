/**
 * Lua scripts live in lua/, one file each, named `<command>-<numberOfKeys>.lua` (bullmq's
 * convention; a `-n` suffix means the caller passes the key count). Shared code sits in an
 * `includes/` folder beside a script and is inlined where the script says `--- @include "<name>"`;
 * a name not found there is taken from lua/includes/ (code every family shares, the token bucket).
 * Files are read when a module is built (never at import time) and registered with ioredis
 * `defineCommand`, which sends EVALSHA and falls back to EVAL on NOSCRIPT, so a restarted Redis
 * costs one extra round trip, never an error.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Cluster, Redis } from "ioredis";

export type RedisClient = Redis | Cluster;

export const luaDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "lua");

export interface ScriptFile {
  /** The ioredis command name it is registered as. */
  command: string;
  /** undefined: variable, the first argument of each call is the key count. */
  numberOfKeys: number | undefined;
  lua: string;
}

const INCLUDE = /^--- @include "([A-Za-z0-9_-]+)"[ \t]*$/gm;

function expandIncludes(source: string, dir: string, seen: readonly string[]): string {
  return source.replace(INCLUDE, (_line, name: string) => {
    if (seen.includes(name)) throw new Error(`circular Lua include: ${[...seen, name].join(" -> ")}`);
    const own = join(dir, "includes", `${name}.lua`);
    const body = readFileSync(existsSync(own) ? own : join(luaDir, "includes", `${name}.lua`), "utf8");
    return expandIncludes(body, dir, [...seen, name]);
  });
}

/** Reads `<dir>/<fileBase>.lua` with its includes expanded; the name gives command and key count. */
export function readScript(fileBase: string, dir: string = luaDir): ScriptFile {
  const match = /^(.+)-(\d+|n)$/.exec(fileBase);
  if (!match) throw new Error(`script file name ${fileBase} does not follow <name>-<keys>.lua`);
  const [, name, keys] = match as unknown as [string, string, string];
  return {
    command: name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()),
    numberOfKeys: keys === "n" ? undefined : Number(keys),
    lua: expandIncludes(readFileSync(join(dir, `${fileBase}.lua`), "utf8"), dir, []),
  };
}

/** Registers each script once per client; a second call for the same client is a no-op. */
export function defineScripts(redis: RedisClient, fileBases: readonly string[]): void {
  const defined = redis as unknown as Record<string, unknown>;
  for (const base of fileBases) {
    const script = readScript(base);
    if (typeof defined[script.command] === "function") continue;
    redis.defineCommand(script.command, {
      lua: script.lua,
      ...(script.numberOfKeys === undefined ? {} : { numberOfKeys: script.numberOfKeys }),
    });
  }
}

/** Calls a registered script by name with keys and arguments, typed at the call site. */
export async function callScript<T>(
  redis: RedisClient,
  command: string,
  keys: readonly string[],
  args: readonly (string | number)[],
  variableKeys = false,
): Promise<T> {
  const fn = (redis as unknown as Record<string, (...a: (string | number)[]) => Promise<T>>)[command];
  if (typeof fn !== "function") throw new Error(`script ${command} is not defined on this client`);
  return variableKeys ? fn.call(redis, keys.length, ...keys, ...args) : fn.call(redis, ...keys, ...args);
}
