/**
 * The scripts as Redis Functions (Redis >= 7): one library per script file, loaded once per master
 * (`FUNCTION LOAD`), called with FCALL.
 *
 * Why: an EVALSHA runs the script's whole chunk on every call, and the chunk begins with its
 * includes, so every call makes each include function the script calls again (a closure each, its
 * upvalues bound, ~1,500 instructions): ~54,000 of a status poll's 388,000 (36 functions), ~20,000
 * of a join batch's call (16; `npm run bench:redis-instructions`, BENCHMARKS.md). A library
 * runs its chunk once, at `FUNCTION LOAD`: the includes' functions are made there and kept, and
 * each FCALL runs only the script's own body.
 *
 * The library of `lua/<dir>/<name>-<keys>.lua`:
 *
 *     #!lua name=onsale_<command>_<hash>
 *     local KEYS, ARGV = {}, {}
 *     <the includes, inlined as for EVALSHA; a top-level `local` that reads KEYS or ARGV is only
 *      declared here, and assigned at each call>
 *     redis.register_function{ function_name = 'onsale_<command>_<hash>', callback = function(keys, args)
 *     KEYS, ARGV = keys, args
 *     <those assignments>
 *     <the script's own body, as written>
 *     end, flags = { 'no-writes' } }      -- a read-only script only
 *
 * So the body reads KEYS and ARGV as it does under EVAL (they are the library's locals, set at each
 * call: Redis runs one call at a time), and the includes' functions are the same text with the
 * same scoping. The hash is of the library's text: two versions of a gateway running at once each
 * call their own, and a library is never replaced under a running caller. Libraries of versions
 * no longer running stay in Redis (a few kilobytes each) until `FUNCTION DELETE` or `FUNCTION FLUSH`
 * (docs/redis-cluster.md).
 *
 * What the include may hold at its top level is what the includes hold today: `local function`s and
 * constants (tables it only reads). Code that calls Redis at the top level of an include would run
 * at load, where Redis refuses it: test/redis/functions.test.ts loads every script's library.
 */
import { createHash } from "node:crypto";

export interface FunctionLibrary {
  /** Library and function name (one function a library): `onsale_<command>_<hash>`. */
  name: string;
  /** The library's source, for `FUNCTION LOAD`. */
  code: string;
}

/** A top-level `local a, b = ...` of an include, with its continuation lines (indented). */
const TOP_LOCAL =
  /^local (?!function\b)([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*=([^\n]*(?:\n[ \t]+[^\n]*)*)/gm;
const READS_CALL_INPUT = /\b(?:KEYS|ARGV)\b/;

/**
 * The library of one script: `includes` is the text of its includes, inlined (each once), `body`
 * the script without its `--- @include` lines. `command` names it; `readOnly` flags it `no-writes`
 * (so FCALL_RO may run it on a replica); `drop` leaves out the includes' functions the body never
 * calls (scripts.ts's `dropUnusedFunctions`: fewer upvalues, a smaller library).
 */
export function buildLibrary(
  command: string,
  includes: string,
  body: string,
  readOnly: boolean,
  drop: (lua: string) => string,
): FunctionLibrary {
  const perCall: string[] = [];
  const hoisted = includes.replace(TOP_LOCAL, (statement, names: string, value: string) => {
    if (!READS_CALL_INPUT.test(value)) return statement;
    perCall.push(`${names} =${value}`);
    return `local ${names}`;
  });
  const flags = readOnly ? ", flags = { 'no-writes' }" : "";
  const text = drop(
    [
      `#!lua name=${NAME}`,
      "local KEYS, ARGV = {}, {}",
      hoisted,
      `redis.register_function{ function_name = '${NAME}', callback = function(keys, args)`,
      "KEYS, ARGV = keys, args",
      ...perCall,
      body,
      `end${flags} }`,
      "",
    ].join("\n"),
  );
  // The name carries the hash of the text (written with a placeholder for the name).
  const name = `onsale_${command}_${createHash("sha1").update(text).digest("hex").slice(0, 16)}`;
  return { name, code: text.replaceAll(NAME, name) };
}

const NAME = "__ONSALE_LIBRARY__";

/** Redis's answer to an FCALL of a function no library on that server defines. */
export const isFunctionNotFound = (err: unknown): boolean =>
  err instanceof Error && /\bFunction not found\b/i.test(err.message);

/**
 * A server where this client cannot use Functions: FUNCTION is an unknown command there (Redis < 7,
 * or renamed away), or the client's ACL user may not load libraries (NOPERM).
 */
export const isFunctionsUnsupported = (err: unknown): boolean =>
  err instanceof Error &&
  (/unknown command .?function\b/i.test(err.message) || /^NOPERM\b.*\bfunction\b/i.test(err.message));

/** `FUNCTION LOAD` of a library already loaded (by this process earlier, or another). */
export const isAlreadyLoaded = (err: unknown): boolean =>
  err instanceof Error && /\balready exists\b/i.test(err.message);
