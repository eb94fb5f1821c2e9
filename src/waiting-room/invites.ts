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
 * otherwise), `evt` the event it admits to, `exp` its expiry (the operator chooses how far). HS256 is checked with INVITE_SECRET, EdDSA
 * (Ed25519) with INVITE_PUBLIC_KEY (a PEM public key or a JWK, inline or the path of a file).
 * `npm run mint-invite` (scripts/mint-invite.ts) mints one.
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

export type InviteFailure = "malformed" | "bad_signature" | "unsupported_alg" | "expired" | "wrong_event" | "no_key";

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

function jsonPart(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
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
      const header = jsonPart(h) as { alg?: unknown } | undefined;
      if (!header || typeof header !== "object") return { ok: false, reason: "malformed" };
      const signed = Buffer.from(`${h}.${p}`);
      const signature = Buffer.from(s, "base64url");
      if (header.alg === "HS256") {
        if (!secret) return { ok: false, reason: "no_key" };
        const expected = createHmac("sha256", secret).update(signed).digest();
        if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) {
          return { ok: false, reason: "bad_signature" };
        }
      } else if (header.alg === "EdDSA") {
        if (!publicKey) return { ok: false, reason: "no_key" };
        if (!verify(null, signed, publicKey, signature)) return { ok: false, reason: "bad_signature" };
      } else {
        return { ok: false, reason: "unsupported_alg" };
      }
      const payload = jsonPart(p) as { evt?: unknown; sub?: unknown; exp?: unknown } | undefined;
      if (!payload || typeof payload !== "object") return { ok: false, reason: "malformed" };
      const { evt, sub, exp } = payload;
      if (typeof evt !== "string" || typeof sub !== "string" || typeof exp !== "number") {
        return { ok: false, reason: "malformed" };
      }
      if (sub.length === 0 || sub.length > 128) return { ok: false, reason: "malformed" };
      if (evt !== eventId) return { ok: false, reason: "wrong_event" };
      if (exp * 1000 <= nowMs) return { ok: false, reason: "expired" };
      return { ok: true, claims: { eventId: evt, identity: sub, exp } };
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
