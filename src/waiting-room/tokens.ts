/**
 * Queue tokens and access tokens: HS256 JWTs signed with the gateway secret. They verify without
 * Redis. The `kind` claim keeps them apart: a queue token is never accepted where an access token
 * is asked for, nor the reverse, and each names one event.
 *
 * Claims: `iss` "onsale-gateway", `kind` "queue" | "access", `sub` fanId, `evt` eventId, `iat`,
 * `exp`, `epoch` (the waiting room's epoch when the token was issued; absent for a room created
 * before epochs existed); access tokens add `sid` (the session id that isSessionActive checks on
 * claim paths).
 *
 * Signed and verified with node:crypto HMAC, synchronously: every status poll and claim checks a
 * token, and jose's async WebCrypto verification cost more than the rest of a poll. The tokens
 * are the same bytes jose made (test/waiting-room/tokens-jose.test.ts checks both directions),
 * and the verification refuses everything jose's `jwtVerify` refused with the options this file
 * gave it, and a little more: a header other than exactly HS256/JWT (so no `crit`, `b64`, `kid`),
 * and a segment that is not canonical base64url (jose's decoder let four spellings of a
 * signature's last character, and padding, through).
 */
import { createHmac, createSecretKey, timingSafeEqual } from "node:crypto";

export const TOKEN_ISSUER = "onsale-gateway";

/** How far ahead of this process's clock a token's `iat` may be (gateways and Redis disagree a little). */
export const MAX_CLOCK_SKEW_MS = 60_000;

export type TokenKind = "queue" | "access";

export interface QueueTokenClaims {
  kind: "queue";
  fanId: string;
  eventId: string;
  /** The room epoch the token was issued in; undefined for a token without one. */
  epoch: string | undefined;
  issuedAt: Date;
  expiresAt: Date;
}

export interface AccessTokenClaims {
  kind: "access";
  fanId: string;
  eventId: string;
  sessionId: string;
  /** The room epoch the session was admitted in; undefined for a token without one. */
  epoch: string | undefined;
  issuedAt: Date;
  expiresAt: Date;
}

/**
 * Why a token was refused. The HTTP contract maps `malformed`, `bad_signature` and `expired` to
 * 401 unauthenticated, `wrong_kind` and `wrong_event` to 403 forbidden.
 */
export type TokenFailure = "malformed" | "bad_signature" | "expired" | "wrong_kind" | "wrong_event";

export type TokenCheck<C> = { ok: true; claims: C } | { ok: false; reason: TokenFailure };

export interface TokenService {
  signQueueToken(input: { fanId: string; eventId: string; epoch?: string | undefined }): string;
  signAccessToken(input: {
    fanId: string;
    eventId: string;
    sessionId: string;
    epoch?: string | undefined;
    issuedAt: Date;
    expiresAt: Date;
  }): string;
  /** Synchronous: no I/O, one HMAC. */
  verifyQueueToken(token: string, eventId: string): TokenCheck<QueueTokenClaims>;
  verifyAccessToken(token: string, eventId: string): TokenCheck<AccessTokenClaims>;
}

export interface TokenOptions {
  /** The gateway secret: at least 32 bytes. */
  secret: string | Uint8Array;
  /** How long a queue token is valid; default 7 days (a pre-queue may open days ahead). */
  queueTokenTtlSeconds?: number;
  /** The clock, in ms since the epoch; tests pass their own. */
  now?: () => number;
}

/** The one header this service signs with, as jose spelled it: `{"alg":"HS256","typ":"JWT"}`. */
const HEADER = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url");
/** An HMAC-SHA256 is 32 bytes: 43 base64url characters, no padding. */
const SIGNATURE_LENGTH = 43;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
/** Each base64url character's 6-bit value, by char code. */
const BASE64URL_VALUE = (() => {
  const values = new Uint8Array(128);
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (let i = 0; i < alphabet.length; i++) values[alphabet.charCodeAt(i)] = i;
  return values;
})();
const NOT_ASCII = /[\u0080-\uffff]/;
// Fatal, like jose's: a payload that is not UTF-8 is malformed, not repaired with U+FFFD.
const utf8 = new TextDecoder("utf-8", { fatal: true });

type Failure = { ok: false; reason: TokenFailure };
const fail = (reason: TokenFailure): Failure => ({ ok: false, reason });
const MALFORMED = fail("malformed");

/**
 * Strict base64url: only the alphabet, no padding, no impossible length, and the unused low bits
 * of the last character zero (Buffer's decoder accepts all of these; re-encoding tells).
 */
function decodeSegment(segment: string): Buffer | undefined {
  const rest = segment.length % 4;
  if (segment.length === 0 || rest === 1 || !BASE64URL.test(segment)) return undefined;
  // The last character of a 2- or 3-character tail carries 4 or 2 bits that encode nothing: zero
  // in the one canonical spelling. (Re-encoding the bytes to compare told the same, at the cost of
  // a second conversion on every poll.)
  if (rest !== 0 && (BASE64URL_VALUE[segment.charCodeAt(segment.length - 1)]! & (rest === 2 ? 0x0f : 0x03)) !== 0) {
    return undefined;
  }
  return Buffer.from(segment, "base64url");
}

/** A JSON object (not an array, not null) from a base64url segment, or undefined. */
function jsonObject(segment: string): Record<string, unknown> | undefined {
  const bytes = decodeSegment(segment);
  if (!bytes) return undefined;
  try {
    const value: unknown = JSON.parse(utf8.decode(bytes));
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Exactly `{alg: "HS256", typ: "JWT"}`, in any order or spacing: no `crit`, no other member. */
function headerIsOurs(segment: string): boolean {
  if (segment === HEADER) return true;
  const header = jsonObject(segment);
  if (!header) return false;
  const keys = Object.keys(header);
  return keys.length === 2 && header.alg === "HS256" && header.typ === "JWT";
}

/** jose refused a non-finite NumericDate when signing; so does this. */
function numericDate(value: number, what: string): number {
  if (!Number.isFinite(value)) throw new TypeError(`Invalid ${what} input`);
  return value;
}

/** The token's HMAC-SHA256 over its signing input, base64url. */
type Mac = (signingInput: string) => string;

/** Claims in the order jose wrote them (payload first, then iss, sub, iat, exp): the same bytes. */
function signToken(mac: Mac, payload: Record<string, string>, sub: string, iat: number, exp: number): string {
  if (typeof sub !== "string") throw new TypeError('"sub" claim must be a string');
  const claims = { ...payload, iss: TOKEN_ISSUER, sub, iat: numericDate(iat, "iat"), exp: numericDate(exp, "exp") };
  const signingInput = `${HEADER}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`;
  return `${signingInput}.${mac(signingInput)}`;
}

/**
 * The checks in jose's order, so each token gets the reason it got before: the shape and the
 * header (malformed), the MAC (bad_signature), the claims set (malformed), the presence of
 * iss/exp/iat/sub and the issuer, the types of iat and nbf, nbf not in the future (malformed),
 * exp in the future (expired); then this service's own: sub and evt strings, iat and exp non-zero,
 * epoch a string if present, iat not past the clock skew (malformed), kind, event.
 */
function verifyToken(mac: Mac, now: () => number, token: string, kind: TokenKind, eventId: string) {
  if (typeof token !== "string") return MALFORMED;
  const firstDot = token.indexOf(".");
  const secondDot = firstDot < 0 ? -1 : token.indexOf(".", firstDot + 1);
  if (secondDot < 0 || token.indexOf(".", secondDot + 1) >= 0) return MALFORMED;
  if (!headerIsOurs(token.slice(0, firstDot))) return MALFORMED;
  const payloadSegment = token.slice(firstDot + 1, secondDot);
  const signature = token.slice(secondDot + 1);
  // As jose: a payload must be ASCII to be signed over; whether it is base64url tells after the
  // MAC (so a tampered payload is a bad signature, as it was).
  if (NOT_ASCII.test(payloadSegment) || !BASE64URL.test(signature)) return MALFORMED;
  const signingInput = token.slice(0, secondDot);
  // Comparing the canonical encodings compares the MACs (one spelling per 32 bytes), and refuses
  // the spellings a lenient decoder would have let through. The length is no secret.
  if (signature.length !== SIGNATURE_LENGTH) return fail("bad_signature");
  if (!timingSafeEqual(Buffer.from(signature, "latin1"), Buffer.from(mac(signingInput), "latin1"))) {
    return fail("bad_signature");
  }
  const payload = jsonObject(payloadSegment);
  if (!payload) return MALFORMED;
  for (const claim of ["iss", "exp", "iat", "sub"]) if (!Object.hasOwn(payload, claim)) return MALFORMED;
  if (payload.iss !== TOKEN_ISSUER) return MALFORMED;
  const nowMs = now();
  const nowSeconds = Math.floor(nowMs / 1000);
  const { sub, evt, sid, iat, nbf, exp, epoch } = payload;
  if (typeof iat !== "number") return MALFORMED;
  if (nbf !== undefined && (typeof nbf !== "number" || nbf > nowSeconds)) return MALFORMED;
  if (typeof exp !== "number") return MALFORMED;
  if (exp <= nowSeconds) return fail("expired");
  if (typeof sub !== "string" || typeof evt !== "string" || !iat || !exp) return MALFORMED;
  if (epoch !== undefined && typeof epoch !== "string") return MALFORMED;
  // Issued in the future (past the clock skew between gateways and Redis): not ours.
  if (iat * 1000 > nowMs + MAX_CLOCK_SKEW_MS) return MALFORMED;
  if (payload.kind !== kind) return fail("wrong_kind");
  if (evt !== eventId) return fail("wrong_event");
  return {
    ok: true as const,
    fanId: sub,
    eventId: evt,
    sessionId: typeof sid === "string" ? sid : undefined,
    epoch,
    issuedAt: new Date(iat * 1000),
    expiresAt: new Date(exp * 1000),
  };
}

export function createTokenService(options: TokenOptions): TokenService {
  const raw = typeof options.secret === "string" ? new TextEncoder().encode(options.secret) : options.secret;
  if (raw.byteLength < 32) throw new RangeError("the gateway secret must be at least 32 bytes");
  // A KeyObject made once: createHmac then skips copying the secret on every call.
  const key = createSecretKey(raw);
  const now = options.now ?? Date.now;
  const queueTtl = options.queueTokenTtlSeconds ?? 7 * 24 * 3600;

  const mac: Mac = (signingInput: string) => createHmac("sha256", key).update(signingInput).digest("base64url");

  const sign = (payload: Record<string, string>, sub: string, iat: number, exp: number) =>
    signToken(mac, payload, sub, iat, exp);
  const verify = (token: string, kind: TokenKind, eventId: string) => verifyToken(mac, now, token, kind, eventId);

  return {
    signQueueToken({ fanId, eventId, epoch }) {
      const iat = Math.floor(now() / 1000);
      return sign({ kind: "queue", evt: eventId, ...(epoch ? { epoch } : {}) }, fanId, iat, iat + queueTtl);
    },

    signAccessToken({ fanId, eventId, sessionId, epoch, issuedAt, expiresAt }) {
      // Deterministic for one session (iat = admission, exp = session expiry rounded up to the
      // second JWTs count in): every poll of an admitted fan returns the same token. The session
      // in Redis stays the authority (isSessionActive); the token never expires before it.
      return sign(
        { kind: "access", evt: eventId, sid: sessionId, ...(epoch ? { epoch } : {}) },
        fanId,
        Math.floor(issuedAt.getTime() / 1000),
        Math.ceil(expiresAt.getTime() / 1000),
      );
    },

    verifyQueueToken(token, eventId) {
      const v = verify(token, "queue", eventId);
      if (!v.ok) return v;
      return {
        ok: true,
        claims: {
          kind: "queue",
          fanId: v.fanId,
          eventId: v.eventId,
          epoch: v.epoch,
          issuedAt: v.issuedAt,
          expiresAt: v.expiresAt,
        },
      };
    },

    verifyAccessToken(token, eventId) {
      const v = verify(token, "access", eventId);
      if (!v.ok) return v;
      if (v.sessionId === undefined) return { ok: false, reason: "malformed" };
      return {
        ok: true,
        claims: {
          kind: "access",
          fanId: v.fanId,
          eventId: v.eventId,
          sessionId: v.sessionId,
          epoch: v.epoch,
          issuedAt: v.issuedAt,
          expiresAt: v.expiresAt,
        },
      };
    },
  };
}
