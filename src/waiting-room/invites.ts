/**
 * Invite tokens (issue 18 item 3): the operator's own system (its account pages, its presale
 * list) signs who may join; with a room's `invites` setting on, a join for a new place must
 * carry one, and one identity holds one place.
 *
 * An invite is a compact JWT (RFC 7519), signed by the operator:
 *
 *     header   {"alg": "HS256" | "EdDSA", "typ": "JWT"}           (any other alg is refused)
 *     payload  {"evt": "<eventId>", "sub": "<identity>", "exp": <seconds since the epoch>}
 *
 * `sub` is the operator's id of the person (1..128 characters; the gateway never reads it
 * otherwise), `evt` the event it admits to, `exp` its expiry (the operator chooses how far, up to
 * MAX_INVITE_LIFETIME_SECONDS). HS256 is checked with INVITE_SECRET, EdDSA
 * (Ed25519) with INVITE_PUBLIC_KEY (a PEM public key or a JWK, inline or the path of a file).
 * `npm run mint-invite` (scripts/mint-invite.ts) mints one.
 *
 * Parsed strictly, since a lenient reading is one an attacker gets to choose: each part is the
 * canonical base64url of its bytes (no padding, no stray characters, no set bits past the end:
 * Node's decoder would skip them, so two texts would check as one token); the signature is exactly
 * as long as its alg's (32 bytes HS256, 64 EdDSA); the header and payload are UTF-8 JSON objects
 * that name no member twice (parsers differ on which one wins); a `crit` header is refused (it
 * lists extensions the recipient must understand, and the gateway understands none: RFC 7515
 * 4.1.11); `exp` is a whole number of seconds, safe as a double, no further off than the longest
 * lifetime (an `exp` of 1e300 is an invite that never expires).
 */
import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  type JsonWebKey,
  type KeyObject,
  sign,
  timingSafeEqual,
  verify,
} from "node:crypto";
import { readFileSync } from "node:fs";

export interface InviteClaims {
  eventId: string;
  identity: string;
  exp: number;
}

export type InviteFailure =
  | "malformed"
  | "bad_signature"
  | "unsupported_alg"
  | "unsupported_header"
  | "expired"
  | "exp_too_far"
  | "wrong_event"
  | "no_key";

/** The furthest `exp` an invite may carry, from when it is checked: a year (366 days). */
export const MAX_INVITE_LIFETIME_SECONDS = 366 * 86_400;

/** Signature bytes per alg: HMAC-SHA256, Ed25519. */
const SIGNATURE_BYTES = { HS256: 32, EdDSA: 64 } as const;

export type InviteCheck = { ok: true; claims: InviteClaims } | { ok: false; reason: InviteFailure };

export interface InviteVerifier {
  /** Whether any key is configured (without one every invite is refused `no_key`). */
  readonly configured: boolean;
  verify(token: string, eventId: string, nowMs?: number): InviteCheck;
}

export interface InviteKeys {
  /** HS256: a shared secret (at least 32 characters). */
  secret?: string | undefined;
  /** EdDSA: an Ed25519 public key, PEM or JWK (JSON), or the path of a file holding one. */
  publicKey?: string | undefined;
}

/** Reads INVITE_PUBLIC_KEY: PEM or JWK text, else a file's path. Throws on a key that is not Ed25519. */
export function loadInvitePublicKey(value: string): KeyObject {
  let text = value.trim();
  if (!text.startsWith("-----") && !text.startsWith("{")) text = readFileSync(text, "utf8").trim();
  const key = text.startsWith("{")
    ? createPublicKey({ key: JSON.parse(text) as JsonWebKey, format: "jwk" })
    : createPublicKey(text);
  if (key.asymmetricKeyType !== "ed25519") {
    throw new Error(`an Ed25519 public key, not ${key.asymmetricKeyType ?? "unknown"}`);
  }
  return key;
}

/** The bytes of a part that is the canonical base64url of them; undefined for any other text. */
function canonicalBytes(part: string): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(part) || part.length % 4 === 1) return undefined;
  const bytes = Buffer.from(part, "base64url");
  // Set bits past the last byte decode to the same bytes: only the canonical text checks.
  return bytes.toString("base64url") === part ? bytes : undefined;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A part that is a JSON object naming each member once; undefined for anything else. */
function jsonObjectPart(part: string): Record<string, unknown> | undefined {
  const bytes = canonicalBytes(part);
  if (!bytes || bytes.length === 0) return undefined;
  try {
    const text = utf8.decode(bytes);
    const value: unknown = JSON.parse(text);
    if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
    return namesMemberTwice(text) ? undefined : (value as Record<string, unknown>);
  } catch {
    return undefined;
  }
}

/**
 * Whether the top-level object of a JSON text (one JSON.parse took) names a member twice, the
 * names compared with their escapes decoded (`"alg"` and `"\u0061lg"` are one name).
 */
function namesMemberTwice(json: string): boolean {
  const seen = new Set<string>();
  let depth = 0;
  let atName = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === '"') {
      let end = i + 1;
      while (json[end] !== '"') end += json[end] === "\\" ? 2 : 1;
      if (depth === 1 && atName) {
        const name = JSON.parse(json.slice(i, end + 1)) as string;
        if (seen.has(name)) return true;
        seen.add(name);
        atName = false;
      }
      i = end;
    } else if (c === "{" || c === "[") {
      depth++;
      atName = depth === 1;
    } else if (c === "}" || c === "]") {
      depth--;
    } else if (c === "," && depth === 1) {
      atName = true;
    }
  }
  return false;
}

export function createInviteVerifier(keys: InviteKeys): InviteVerifier {
  const secret = keys.secret ? Buffer.from(keys.secret, "utf8") : undefined;
  const publicKey = keys.publicKey ? loadInvitePublicKey(keys.publicKey) : undefined;
  return {
    configured: secret !== undefined || publicKey !== undefined,
    verify(token, eventId, nowMs = Date.now()) {
      if (typeof token !== "string" || token.length > 4_096) return { ok: false, reason: "malformed" };
      const parts = token.split(".");
      if (parts.length !== 3) return { ok: false, reason: "malformed" };
      const [h = "", p = "", s = ""] = parts;
      const header = jsonObjectPart(h);
      if (!header) return { ok: false, reason: "malformed" };
      const alg = header.alg;
      if (alg !== "HS256" && alg !== "EdDSA") return { ok: false, reason: "unsupported_alg" };
      if ("crit" in header) return { ok: false, reason: "unsupported_header" };
      const signature = canonicalBytes(s);
      if (!signature || signature.length !== SIGNATURE_BYTES[alg]) return { ok: false, reason: "malformed" };
      const payload = jsonObjectPart(p);
      if (!payload) return { ok: false, reason: "malformed" };
      const signed = Buffer.from(`${h}.${p}`);
      if (alg === "HS256") {
        if (!secret) return { ok: false, reason: "no_key" };
        const expected = createHmac("sha256", secret).update(signed).digest();
        if (!timingSafeEqual(signature, expected)) return { ok: false, reason: "bad_signature" };
      } else {
        if (!publicKey) return { ok: false, reason: "no_key" };
        if (!verify(null, signed, publicKey, signature)) return { ok: false, reason: "bad_signature" };
      }
      const { evt, sub, exp } = payload;
      if (typeof evt !== "string" || typeof sub !== "string" || !Number.isSafeInteger(exp)) {
        return { ok: false, reason: "malformed" };
      }
      const expSeconds = exp as number;
      if (sub.length === 0 || sub.length > 128) return { ok: false, reason: "malformed" };
      if (evt !== eventId) return { ok: false, reason: "wrong_event" };
      if (expSeconds * 1000 <= nowMs) return { ok: false, reason: "expired" };
      if (expSeconds * 1000 > nowMs + MAX_INVITE_LIFETIME_SECONDS * 1000) return { ok: false, reason: "exp_too_far" };
      return { ok: true, claims: { eventId: evt, identity: sub, exp: expSeconds } };
    },
  };
}

/** Signs an invite (the operator's side; scripts/mint-invite.ts and the tests use it). */
export function mintInvite(claims: InviteClaims, key: { secret: string } | { privateKey: KeyObject | string }): string {
  const alg = "secret" in key ? "HS256" : "EdDSA";
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const body = `${part({ alg, typ: "JWT" })}.${part({ evt: claims.eventId, sub: claims.identity, exp: claims.exp })}`;
  if ("secret" in key) return `${body}.${createHmac("sha256", key.secret).update(body).digest("base64url")}`;
  const privateKey = typeof key.privateKey === "string" ? createPrivateKey(key.privateKey) : key.privateKey;
  return `${body}.${sign(null, Buffer.from(body), privateKey).toString("base64url")}`;
}
