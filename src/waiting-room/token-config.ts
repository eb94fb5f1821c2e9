/**
 * TOKEN_ALG and TOKEN_SIGNING_KEYS, read by src/config.ts (which hands in the two raw values and
 * turns a fault into its ConfigError), so a bad key stops the process at start, named, never at
 * the first token.
 *
 *  - TOKEN_ALG: `HS256` (the default: the gateway secret signs), `ES256` or `EdDSA`.
 *  - TOKEN_SIGNING_KEYS: a JSON array of keys (src/waiting-room/signing-keys.ts), or the path of a
 *    file holding one (a mounted secret). Unset with an asymmetric TOKEN_ALG: bootstrap keeps a
 *    generated key in DATA_DIR/secrets.json (one gateway; several must share a key set).
 *  - TOKEN_SIGNING_KEYS set and TOKEN_ALG unset: the active key's algorithm.
 */
import { readFileSync } from "node:fs";
import {
  type AsymmetricAlgorithm,
  loadSigningKeys,
  parseSigningKeys,
  type SigningKeyInput,
  TOKEN_ALGORITHMS,
  type TokenAlgorithm,
} from "./signing-keys.js";

export interface TokenSigningConfig {
  alg: TokenAlgorithm;
  /** TOKEN_SIGNING_KEYS, checked (one active key of `alg`, each PEM of its curve); undefined when unset. */
  signingKeys: SigningKeyInput[] | undefined;
  /** `inline` (JSON in the variable) or the file's path; undefined when unset. */
  source: string | undefined;
}

type Loaded =
  | { ok: true; config: TokenSigningConfig }
  | { ok: false; variable: "TOKEN_ALG" | "TOKEN_SIGNING_KEYS"; message: string };

export function loadTokenSigning(alg: string | undefined, keys: string | undefined): Loaded {
  if (alg !== undefined && !(TOKEN_ALGORITHMS as readonly string[]).includes(alg)) {
    return { ok: false, variable: "TOKEN_ALG", message: `one of ${TOKEN_ALGORITHMS.join(", ")}, not ${alg}` };
  }
  const wanted = alg as TokenAlgorithm | undefined;
  if (keys === undefined)
    return { ok: true, config: { alg: wanted ?? "HS256", signingKeys: undefined, source: undefined } };
  if (wanted === "HS256") {
    return {
      ok: false,
      variable: "TOKEN_SIGNING_KEYS",
      message: "keys sign ES256 or EdDSA tokens; with TOKEN_ALG HS256 the gateway secret signs (unset one of them)",
    };
  }
  // JSON when it looks like JSON; anything else is a file's path.
  const inline = keys.trimStart().startsWith("[");
  let text = keys;
  if (!inline) {
    try {
      text = readFileSync(keys, "utf8");
    } catch (err) {
      return { ok: false, variable: "TOKEN_SIGNING_KEYS", message: `cannot read ${keys}: ${(err as Error).message}` };
    }
  }
  try {
    const signingKeys = parseSigningKeys(text);
    const set = loadSigningKeys(signingKeys, wanted as AsymmetricAlgorithm | undefined);
    return { ok: true, config: { alg: set.alg, signingKeys, source: inline ? "inline" : keys } };
  } catch (err) {
    const where = inline ? "" : ` (in ${keys})`;
    return { ok: false, variable: "TOKEN_SIGNING_KEYS", message: `${(err as Error).message}${where}` };
  }
}
