/**
 * The one loader of the Lua scripts (bullmq's model). Every script is a file under lua/, named
 * `<command>-<numberOfKeys>.lua` (a `-n` suffix means the caller passes the key count), with a
 * header documenting its KEYS, ARGV and replies. Shared code sits in an `includes/` folder and is
 * inlined where a script says `--- @include "<name>"`: first from the script's own family
 * folder (lua/waiting-room/includes/), else from lua/includes/ (code every family shares: the
 * clock, the token bucket). Each include is inlined once per script, so an include may name the
 * includes it needs and a script may name the same one again.
 *
 * A caller declares its family once (`scriptFamily`: a name for each script file) and registers
 * it on a client with `registerScripts`, which returns the family's runner. The functions an
 * include defines that a script never calls are left out of it (`dropUnusedFunctions`). Files are
 * read when a module is built (never at import time) and once per process. Without Redis
 * Functions a script runs through EVALSHA, falling back to EVAL on NOSCRIPT, so a restarted Redis
 * costs one extra round trip, never an error (plain commands: nothing is defined on the client).
 * The runner checks every call's key count against the file name, so a wrong KEYS list fails in
 * TypeScript, not as a confusing nil inside Lua.
 *
 * Replies: each family keeps one table of its scripts' numeric codes (`codeTable`), so a reply
 * is read as a named outcome in one place and an unknown code is an error, never a guess.
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { Cluster, Redis } from "ioredis";
import {
  buildLibrary,
  type FunctionLibrary,
  isAlreadyLoaded,
  isFunctionNotFound,
  isFunctionsUnsupported,
} from "./functions.js";

export type RedisClient = Redis | Cluster;

/** A Cluster client (ioredis marks it `isCluster`), without importing the class at run time. */
function isCluster(redis: RedisClient): redis is Cluster {
  return (redis as { isCluster?: boolean }).isCluster === true;
}

export const luaDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "lua");

export interface ScriptFile {
  /** The file, relative to lua/, without `.lua`: `waiting-room/join-9`. */
  file: string;
  /** The ioredis command name, from the whole path so no two families clash: `waitingRoomJoin`. */
  command: string;
  /** undefined: variable, the runner passes the number of keys it is given. */
  numberOfKeys: number | undefined;
  /** The source with every include inlined (what EVALSHA runs). */
  lua: string;
  /** Its includes, inlined (each once), and the script without its include lines: a library's parts. */
  includes: string;
  body: string;
}

const INCLUDE = /^--- @include "([A-Za-z0-9_-]+)"[ \t]*$/gm;

function expandIncludes(source: string, dir: string, stack: readonly string[], done: Set<string>): string {
  return source.replace(INCLUDE, (_line, name: string) => {
    if (stack.includes(name)) throw new Error(`circular Lua include: ${[...stack, name].join(" -> ")}`);
    // Inlined once: a second copy would redefine its locals (and Lua allows 200 per chunk).
    if (done.has(name)) return `-- (include "${name}" is inlined above)`;
    done.add(name);
    const own = join(dir, "includes", `${name}.lua`);
    const body = readFileSync(existsSync(own) ? own : join(luaDir, "includes", `${name}.lua`), "utf8");
    return expandIncludes(body, dir, [...stack, name], done);
  });
}

/**
 * Drops the top-level `local function`s a script never calls. An include brings every function it
 * defines, and Lua creates each one (a closure, its upvalues bound) on every call of the script:
 * about 1,500 instructions a function, 41 in status-10.lua, which uses 35 (`npm run
 * bench:redis-instructions`). A function is dropped when its name appears nowhere else in the
 * script outside comments, and again until none is (a function used only by a dropped one goes
 * too). Only a block this reader can bound for certain is dropped: `local function name(` at the
 * start of a line, every line after it indented, blank or a comment, up to a line that is exactly
 * `end`. Anything else (a one-line function, a function whose body is not indented) is kept.
 */
export function dropUnusedFunctions(lua: string): string {
  const lines = lua.split("\n");
  // The code without its comments, line for line (a block comment keeps its line breaks).
  const code = lua
    .replace(/--\[\[[\s\S]*?\]\]/g, (comment) => comment.replace(/[^\n]/g, ""))
    .replace(/^[ \t]*--[^\n]*/gm, "")
    .split("\n");
  const blocks = new Map<string, { from: number; to: number }>();
  for (const [i, line] of lines.entries()) {
    const name = /^local function ([A-Za-z_][A-Za-z0-9_]*)\(/.exec(line)?.[1];
    if (!name) continue;
    let to = i + 1;
    while (to < lines.length && /^(?:[ \t]|--|$)/.test(lines[to] ?? "")) to++;
    if (lines[to]?.trimEnd() === "end") blocks.set(name, { from: i, to });
  }
  // The lines naming each function (a word of its name anywhere in the code, strings included).
  const namedAt = new Map<string, number[]>();
  for (const [i, line] of code.entries()) {
    for (const word of line.match(/[A-Za-z_][A-Za-z0-9_]*/g) ?? []) {
      if (blocks.has(word)) namedAt.set(word, [...(namedAt.get(word) ?? []), i]);
    }
  }
  // Until nothing more goes: a function named only inside itself or inside dropped ones goes.
  const gone = new Array<boolean>(lines.length).fill(false);
  const dropped = new Map<number, string>();
  for (let more = true; more; ) {
    more = false;
    for (const [name, { from, to }] of blocks) {
      if (gone[from] || (namedAt.get(name) ?? []).some((i) => (i < from || i > to) && !gone[i])) continue;
      gone.fill(true, from, to + 1);
      dropped.set(from, name);
      more = true;
    }
  }
  return lines
    .flatMap((line, i) => {
      const name = dropped.get(i);
      if (name) return [`-- (function ${name} dropped: this script never calls it)`];
      return gone[i] ? [] : [line];
    })
    .join("\n");
}

/** Every script file under lua/ (includes are not scripts), as `dir/name-keys`: for tests and tools. */
export function scriptFileNames(dir = luaDir): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return entry === "includes" ? [] : scriptFileNames(path);
    return entry.endsWith(".lua") ? [relative(luaDir, path).replace(/\.lua$/, "")] : [];
  });
}

const camel = (s: string) => s.replace(/[-/]([a-z])/g, (_, c: string) => c.toUpperCase());

const read = new Map<string, ScriptFile>();

/** Reads `lua/<file>.lua` with its includes inlined, once per process; the name gives the key count. */
export function readScript(file: string): ScriptFile {
  const cached = read.get(file);
  if (cached) return cached;
  const match = /^(.+)-(\d+|n)$/.exec(file);
  if (!match) throw new Error(`script file ${file} does not follow <name>-<keys>.lua`);
  const [, name, keys] = match as unknown as [string, string, string];
  const path = join(luaDir, `${file}.lua`);
  const source = readFileSync(path, "utf8");
  const done = new Set<string>();
  let includes = "";
  const body = source.replace(INCLUDE, (line) => {
    includes += `${expandIncludes(line, dirname(path), [], done)}\n`;
    return "";
  });
  const script: ScriptFile = {
    file,
    command: camel(name),
    numberOfKeys: keys === "n" ? undefined : Number(keys),
    // The includes (expanded once, above) then the script: what EVALSHA runs, in a library's order.
    lua: dropUnusedFunctions(`${includes}${body}`),
    includes,
    body,
  };
  read.set(file, script);
  return script;
}

export interface ScriptFamily<N extends string> {
  /** For error messages: `waiting-room`, `payment`, `seat-map`. */
  name: string;
  /** Each script's name in the family -> its file under lua/ (no `.lua`). */
  files: Readonly<Record<N, string>>;
  /** Scripts that only read (ioredis may send them to a replica). */
  readOnly?: readonly NoInfer<N>[];
}

/** Declares a family; reading its files waits for the first `registerScripts`. */
export function scriptFamily<const N extends string>(family: ScriptFamily<N>): ScriptFamily<N> {
  return family;
}

/** The family's scripts read from disk (for tests and tools). */
export function familyScripts<N extends string>(family: ScriptFamily<N>): (ScriptFile & { name: N })[] {
  return (Object.entries(family.files) as [N, string][]).map(([name, file]) => ({ name, ...readScript(file) }));
}

/** Runs one script of the family: keys are checked against its file name, the reply is the caller's to decode. */
export type RunScript<N extends string> = <T = unknown>(
  name: N,
  keys: readonly string[],
  args?: readonly (string | number)[],
) => Promise<T>;

interface Registered {
  /** The source EVAL sends, and its SHA-1 for EVALSHA. */
  lua: string;
  sha: string;
  numberOfKeys: number | undefined;
  library: FunctionLibrary;
  readOnly: boolean;
}

/** Whether this process runs its scripts as Redis Functions where the server has them (the default). */
let functionsWanted = true;

/**
 * Redis Functions on or off for the clients registered from now on (REDIS_FUNCTIONS, src/config.ts;
 * on by default). Off, every script runs through EVALSHA as before Redis 7.
 */
export function useRedisFunctions(on: boolean): void {
  functionsWanted = on;
}

/**
 * Per client: whether its server runs Functions (`unknown` until the first load answers), and the
 * libraries loaded (or loading) on it. On a cluster a load goes to every master.
 */
interface ClientFunctions {
  functions: "unknown" | "yes" | "no";
  loads: Map<string, Promise<void>>;
  /** The libraries whose load completed (the hot path calls these at once). */
  loaded: Set<string>;
  /** Every library a family registered on this client has, by name (what `loadScriptLibraries` loads). */
  registered: Map<string, FunctionLibrary>;
}
const clientFunctions = new WeakMap<RedisClient, ClientFunctions>();

function functionsOf(redis: RedisClient): ClientFunctions {
  let state = clientFunctions.get(redis);
  if (!state) {
    state = {
      functions: functionsWanted ? "unknown" : "no",
      loads: new Map(),
      loaded: new Set(),
      registered: new Map(),
    };
    clientFunctions.set(redis, state);
  }
  return state;
}

/**
 * Loads `library` on the client's server (every master of a cluster; replicas take it from their
 * master), once at a time: concurrent callers share the load. Resolves when it is there (on every
 * master that answered: one master down does not stop the others' events), or when the server
 * turned out to have no Functions (`functions` then `no`); rejects when no master took it (Redis
 * away), and the next call tries again.
 */
function loadLibrary(redis: RedisClient, state: ClientFunctions, library: FunctionLibrary): Promise<void> {
  const pending = state.loads.get(library.name);
  if (pending) return pending;
  const load = async () => {
    const nodes: RedisClient[] = isCluster(redis) ? redis.nodes("master") : [redis];
    const answers = await Promise.allSettled(
      nodes.map((node) =>
        withinMs(
          node.call("FUNCTION", "LOAD", library.code).catch((err: unknown) => {
            if (!isAlreadyLoaded(err)) throw err;
          }),
          LOAD_WAIT_MS,
        ),
      ),
    );
    const refused = answers.flatMap((a) => (a.status === "rejected" ? [a.reason as unknown] : []));
    // Any master without Functions (a cluster half upgraded from Redis 6): EVALSHA for this client.
    if (refused.some(isFunctionsUnsupported)) {
      state.functions = "no";
      return;
    }
    // Loaded where a master answered: one that did not (failing over, away) is given the library
    // when a call it serves answers "Function not found". Nothing loaded anywhere: Redis is away.
    if (refused.length === answers.length) throw refused[0] ?? new Error("no Redis master to load scripts on");
    state.functions = "yes";
    state.loaded.add(library.name);
  };
  const loading = load();
  state.loads.set(library.name, loading);
  // A failed load is forgotten, so the next call loads again.
  loading.catch(() => {
    if (state.loads.get(library.name) === loading) state.loads.delete(library.name);
  });
  return loading;
}

/**
 * How long a load waits for a master: one that hangs (stopped, partitioned) must not hold the
 * other masters' calls. It is given the library later, when a call it serves finds it missing.
 */
const LOAD_WAIT_MS = 1_000;

/** `promise`, or a rejection once `ms` have passed. */
function withinMs<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Loads `library` again after a server answered "Function not found" to a call made while `seen`
 * was its load: once however many calls failed at once (a later load already under way is shared).
 */
function reloadLibrary(
  redis: RedisClient,
  state: ClientFunctions,
  library: FunctionLibrary,
  seen: Promise<void> | undefined,
): Promise<void> {
  if (state.loads.get(library.name) === seen) {
    state.loads.delete(library.name);
    state.loaded.delete(library.name);
  }
  return loadLibrary(redis, state, library);
}

/**
 * The family's runner on `redis` (nothing is defined on the client).
 *
 * The runner calls each script as a Redis Function (FCALL, src/redis/functions.ts) when the server
 * has them and `useRedisFunctions` did not turn them off, else through EVALSHA. A script's library
 * is loaded at its first call on this client; a server that lost it (restarted without its data, a
 * new master of a cluster) answers "Function not found", and the runner loads it again and calls
 * once more, as ioredis does for EVALSHA's NOSCRIPT. A server without Functions (Redis < 7) answers
 * the first load "unknown command", and that client runs EVALSHA from then on.
 */
export function registerScripts<N extends string>(redis: RedisClient, family: ScriptFamily<N>): RunScript<N> {
  // No ioredis defineCommand: ioredis copies every script defined on a client onto each pipeline
  // it builds, one per auto-pipelined turn, and 29 scripts made each such pipeline cost 18-33 µs of
  // CPU against 3 with none (`npm run bench:pipeline`). EVALSHA and EVAL are plain commands here,
  // auto-pipelined like any other (ioredis routes them on a Cluster by their first key).
  const byName = new Map<string, Registered>();
  for (const script of familyScripts(family)) {
    const readOnly = family.readOnly?.includes(script.name) ?? false;
    byName.set(script.name, {
      lua: script.lua,
      sha: shaOf(script.lua),
      numberOfKeys: script.numberOfKeys,
      library: libraryOf(script, readOnly),
      readOnly,
    });
  }
  const state = functionsOf(redis);
  for (const { library } of byName.values()) state.registered.set(library.name, library);
  // EVALSHA, and EVAL (which caches the script) when this server has not seen it: once per
  // script after each start of a server that keeps no script cache.
  const viaEval = (script: Registered, keys: readonly string[], args: readonly (string | number)[]) =>
    redis.evalsha(script.sha, keys.length, ...keys, ...args).catch((err: unknown) => {
      if (!isNoScript(err)) throw err;
      return redis.eval(script.lua, keys.length, ...keys, ...args);
    });
  const fcall = (script: Registered, keys: readonly string[], args: readonly (string | number)[]) =>
    script.readOnly
      ? redis.fcall_ro(script.library.name, keys.length, ...keys, ...args)
      : redis.fcall(script.library.name, keys.length, ...keys, ...args);
  const viaFunction = async (script: Registered, keys: readonly string[], args: readonly (string | number)[]) => {
    const { library } = script;
    // A cluster that has not yet read its slots has no master to load on: this call goes through
    // EVALSHA (queued until the cluster is ready, as every command is), the next loads.
    if (isCluster(redis) && redis.nodes("master").length === 0) return viaEval(script, keys, args);
    const seen = loadLibrary(redis, state, library);
    await seen;
    if (state.functions === "no") return viaEval(script, keys, args);
    return fcallReloading(script, keys, args, seen);
  };
  /** FCALL; a server that lost the library (a restart without its data, a new master) gets it again, and the call once more. */
  const fcallReloading = (
    script: Registered,
    keys: readonly string[],
    args: readonly (string | number)[],
    seen: Promise<void> | undefined,
  ) =>
    fcall(script, keys, args).catch(async (err: unknown) => {
      if (!isFunctionNotFound(err)) throw err;
      await reloadLibrary(redis, state, script.library, seen);
      return fcall(script, keys, args);
    });
  const run = (name: N, keys: readonly string[], args: readonly (string | number)[] = []): Promise<unknown> => {
    const script = byName.get(name);
    if (!script) return Promise.reject(new Error(`unknown ${family.name} script ${name}`));
    if (script.numberOfKeys !== undefined && keys.length !== script.numberOfKeys) {
      return Promise.reject(new Error(`${name} takes ${script.numberOfKeys} keys, was given ${keys.length}`));
    }
    if (state.functions === "no") return viaEval(script, keys, args);
    // Loaded: FCALL at once (the hot path: nothing awaited before the command is queued).
    const loaded = state.loaded.has(script.library.name) ? state.loads.get(script.library.name) : undefined;
    if (loaded) return fcallReloading(script, keys, args, loaded);
    return viaFunction(script, keys, args);
  };
  return run as RunScript<N>;
}

/** A script's SHA-1, as EVALSHA names it. */
const shaOf = (lua: string): string => createHash("sha1").update(lua).digest("hex");

/** Redis's answer to an EVALSHA of a script its cache does not hold. */
const isNoScript = (err: unknown): boolean => err instanceof Error && err.message.startsWith("NOSCRIPT");

/** What `loadScriptLibraries` did. */
export interface LibrariesLoaded {
  /** `functions`: the scripts run as Redis Functions; `evalsha`: they run through EVALSHA (off, or a server without Functions). */
  mode: "functions" | "evalsha";
  /** Libraries loaded (on every master that answered). */
  loaded: number;
  /** Libraries no master took (Redis away): each is loaded again at its first call. */
  failed: number;
}

/**
 * Loads every library registered on `redis` so far (by `registerScripts`, any family), all at
 * once: a gateway calls it at its start, so the first fans' calls run FCALL at once instead of each
 * library waiting for its load at its first call. Never rejects: a library not loaded here is loaded
 * at its first call, as without this.
 */
export async function loadScriptLibraries(redis: RedisClient): Promise<LibrariesLoaded> {
  const state = functionsOf(redis);
  if (state.functions === "no") return { mode: "evalsha", loaded: 0, failed: 0 };
  // A cluster that has not read its slots yet has no master to load on: every library would fail.
  if (isCluster(redis) && redis.nodes("master").length === 0) {
    return { mode: "functions", loaded: 0, failed: state.registered.size };
  }
  const answers = await Promise.allSettled(
    [...state.registered.values()].map((library) => loadLibrary(redis, state, library)),
  );
  // A load may have found a server without Functions (TypeScript narrowed `functions` before the await).
  if ((state.functions as ClientFunctions["functions"]) === "no") return { mode: "evalsha", loaded: 0, failed: 0 };
  const failed = answers.filter((a) => a.status === "rejected").length;
  return { mode: "functions", loaded: answers.length - failed, failed };
}

/**
 * The names of this version's libraries: every script file's, read-only or not (a family decides
 * which it is). A library on a server named otherwise is another version's (scripts/redis-functions.ts).
 */
export function currentLibraryNames(): Set<string> {
  const names = new Set<string>();
  for (const file of scriptFileNames()) {
    const script = readScript(file);
    for (const readOnly of [false, true]) names.add(libraryOf(script, readOnly).name);
  }
  return names;
}

/** The library of a script file, built once per process (per read-only flag). */
const libraries = new Map<string, FunctionLibrary>();
function libraryOf(script: ScriptFile, readOnly: boolean): FunctionLibrary {
  const key = `${script.file}\n${readOnly}`;
  let library = libraries.get(key);
  if (!library) {
    library = buildLibrary(script.command, script.includes, script.body, readOnly, dropUnusedFunctions);
    libraries.set(key, library);
  }
  return library;
}

/** A script answered a code its family's table does not know: the script and its caller disagree. */
export class UnknownScriptCode extends Error {
  override name = "UnknownScriptCode";
}

export interface CodeTable<O extends string> {
  /** code -> outcome, as the script headers list them. */
  readonly codes: Readonly<Record<number, O>>;
  /** The outcome `code` stands for; throws UnknownScriptCode for any other value. */
  outcome(code: unknown): O;
}

/** One table from a script family's numeric reply codes to named outcomes. */
export function codeTable<const O extends string>(family: string, codes: Readonly<Record<number, O>>): CodeTable<O> {
  const byCode = new Map<number, O>(Object.entries(codes).map(([code, outcome]) => [Number(code), outcome as O]));
  if (new Set(byCode.values()).size !== byCode.size) throw new Error(`${family}: two codes share an outcome`);
  return {
    codes,
    outcome(code) {
      const outcome = typeof code === "number" ? byCode.get(code) : undefined;
      if (outcome === undefined) throw new UnknownScriptCode(`${family} script returned unknown code ${String(code)}`);
      return outcome;
    },
  };
}
