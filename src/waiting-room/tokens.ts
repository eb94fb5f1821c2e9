/**
 * Queue tokens and access tokens: JWTs signed with the gateway secret (HS256, the default) or with
 * the active key of an asymmetric key set (ES256 or EdDSA, src/waiting-room/signing-keys.ts, a
 * `kid` in the header, the public keys published as a JWKS). They verify without Redis. The `kind` claim keeps them apart: a queue token is never accepted where an access token
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
 *
 * ES256 and EdDSA tokens are verified the same way, synchronously with `crypto.verify` on a
 * KeyObject made once per key. Their header is exactly `{alg, typ: "JWT", kid}` with the alg of
 * the key the kid names (so an HS256 header, or a key of the other algorithm, is refused before
 * any signature is checked: the public key is never taken for an HMAC secret), and an ES256
 * signature must be the low-S one of its two valid forms (the signer writes that one), so a token
 * has one spelling whatever the algorithm.
 */
import { createHmac, createSecretKey, type KeyObject, sign as signWith, timingSafeEqual, verify } from "node:crypto";
import {
  type AsymmetricAlgorithm,
  type JsonWebKeySet,
  jwksOf,
  loadSigningKeys,
  type SigningKeyInput,
  type SigningKeySet,
  type TokenAlgorithm,
} from "./signing-keys.js";

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
  /** Past its expiry (verified with a grace: verifyAccessToken's `expiredGraceSeconds`). */
  expired?: true;
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
  /** Synchronous: no I/O, one HMAC (or one signature check with a key set). */
  verifyQueueToken(token: string, eventId: string): TokenCheck<QueueTokenClaims>;
  /**
   * `expiredGraceSeconds`: a token expired less than that long ago still verifies, its claims
   * marked `expired` (for the few reads an ended session keeps: its purchases' stored answers).
   */
  verifyAccessToken(
    token: string,
    eventId: string,
    options?: { expiredGraceSeconds?: number },
  ): TokenCheck<AccessTokenClaims>;
  /** What new tokens are signed with. */
  readonly algorithm: TokenAlgorithm;
  /** The public keys that verify these tokens (none for HS256). */
  jwks(): JsonWebKeySet;
}

export interface TokenOptions {
  /** The gateway secret, at least 32 bytes: signs and verifies HS256 tokens when `keys` is absent. */
  secret?: string | Uint8Array | undefined;
  /**
   * An ES256 or EdDSA key set: its active key signs (with its `kid`), every listed key verifies the
   * tokens that name it; HS256 tokens are then refused.
   */
  keys?: SigningKeySet | readonly SigningKeyInput[] | undefined;
  /** How long a queue token is valid; default 7 days (a pre-queue may open days ahead). */
  queueTokenTtlSeconds?: number;
  /** The clock, in ms since the epoch; tests pass their own. */
  now?: () => number;
}

/** The one header this service signs with, as jose spelled it: `{"alg":"HS256","typ":"JWT"}`. */
const HEADER = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url");
/** An HMAC-SHA256 is 32 bytes: 43 base64url characters, no padding. */
const HMAC_SIGNATURE_LENGTH = 43;
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

/** How tokens are signed: the header segment every new token carries, and its signature. */
interface Signer {
  header: string;
  /** The signature over the signing input, base64url. */
  sign(signingInput: string): string;
}

/** How one header's tokens are checked: the signature's one length, and the check itself. */
interface Verifier {
  /** In base64url characters; another length is a bad signature before any crypto. */
  signatureLength: number;
  /** `token` is the whole token, `signingInput` and `signature` its two parts. */
  verify(signingInput: string, signature: string, token: string): boolean;
}

/**
 * The verifier a header names; `undefined` when the header is not one this service signs
 * (malformed), `UNKNOWN_KEY` when it is well formed but names a kid not in the key set (a token of
 * a key since removed: a bad signature).
 */
type VerifierFor = (headerSegment: string) => Verifier | typeof UNKNOWN_KEY | undefined;
const UNKNOWN_KEY = Symbol("unknown key");

const ISSUER_JSON = JSON.stringify(TOKEN_ISSUER);

/** Claims in the order jose wrote them (payload first, then iss, sub, iat, exp): the same bytes. */
function signToken(signer: Signer, payload: Record<string, string>, sub: string, iat: number, exp: number): string {
  if (typeof sub !== "string") throw new TypeError('"sub" claim must be a string');
  // The JSON written member by member: JSON.stringify of the spread object was half of a join's
  // signing (3 of 5.7 µs in a micro-benchmark), this a tenth of it. The bytes are the same.
  let json = "{";
  for (const key in payload) json += `${JSON.stringify(key)}:${JSON.stringify(payload[key])},`;
  json += `"iss":${ISSUER_JSON},"sub":${JSON.stringify(sub)},"iat":${JSON.stringify(numericDate(iat, "iat"))},"exp":${JSON.stringify(numericDate(exp, "exp"))}}`;
  const signingInput = `${signer.header}.${Buffer.from(json).toString("base64url")}`;
  return `${signingInput}.${signer.sign(signingInput)}`;
}

/**
 * The checks in jose's order, so each token gets the reason it got before: the shape and the
 * header (malformed), the signature (bad_signature), the claims set (malformed), the presence of
 * iss/exp/iat/sub and the issuer, the types of iat and nbf, nbf not in the future (malformed),
 * exp in the future (expired); then this service's own: sub and evt strings, iat and exp non-zero,
 * epoch a string if present, iat not past the clock skew (malformed), kind, event.
 */
/**
 * Payloads of tokens whose signature verified, by the whole token string (so no other token can
 * match): a fan polls with the same queue token, and claims with the same access token, many
 * times, and the signature check and the payload's parse were most of a cached poll's own work.
 * Every claim, the expiry included, is still checked on every call. The oldest go first past
 * VERIFIED_KEPT (about 10 MB of token strings at most).
 */
type VerifiedPayloads = Map<string, Record<string, unknown>>;

function verifyToken(
  verifierFor: VerifierFor,
  now: () => number,
  token: string,
  kind: TokenKind,
  eventId: string,
  verified: VerifiedPayloads,
  graceSeconds = 0,
) {
  if (typeof token !== "string") return MALFORMED;
  const known = verified.get(token);
  if (known) return checkClaims(known, now, kind, eventId, graceSeconds);
  const fresh = verifiedPayload(verifierFor, token, verified);
  return "failure" in fresh ? fresh.failure : checkClaims(fresh.payload, now, kind, eventId, graceSeconds);
}

/** The payload of a token not seen before, once its signature verified (and remembered), or the failure. */
function verifiedPayload(
  verifierFor: VerifierFor,
  token: string,
  verified: VerifiedPayloads,
): { payload: Record<string, unknown> } | { failure: Failure } {
  const firstDot = token.indexOf(".");
  const secondDot = firstDot < 0 ? -1 : token.indexOf(".", firstDot + 1);
  if (secondDot < 0 || token.indexOf(".", secondDot + 1) >= 0) return { failure: MALFORMED };
  const verifier = verifierFor(token.slice(0, firstDot));
  if (!verifier) return { failure: MALFORMED };
  const payloadSegment = token.slice(firstDot + 1, secondDot);
  const signature = token.slice(secondDot + 1);
  // As jose: a payload must be ASCII to be signed over; whether it is base64url tells after the
  // signature (so a tampered payload is a bad signature, as it was).
  if (NOT_ASCII.test(payloadSegment) || !BASE64URL.test(signature)) return { failure: MALFORMED };
  if (verifier === UNKNOWN_KEY) return { failure: fail("bad_signature") };
  // The length is no secret.
  if (signature.length !== verifier.signatureLength) return { failure: fail("bad_signature") };
  if (!verifier.verify(token.slice(0, secondDot), signature, token)) return { failure: fail("bad_signature") };
  const payload = jsonObject(payloadSegment);
  if (!payload) return { failure: MALFORMED };
  if (verified.size >= VERIFIED_KEPT) verified.delete(verified.keys().next().value as string);
  verified.set(token, payload);
  return { payload };
}

function checkClaims(
  payload: Record<string, unknown>,
  now: () => number,
  kind: TokenKind,
  eventId: string,
  graceSeconds = 0,
) {
  for (const claim of ["iss", "exp", "iat", "sub"]) if (!Object.hasOwn(payload, claim)) return MALFORMED;
  if (payload.iss !== TOKEN_ISSUER) return MALFORMED;
  const nowMs = now();
  const nowSeconds = Math.floor(nowMs / 1000);
  const { sub, evt, sid, iat, nbf, exp, epoch } = payload;
  if (typeof iat !== "number") return MALFORMED;
  if (nbf !== undefined && (typeof nbf !== "number" || nbf > nowSeconds)) return MALFORMED;
  if (typeof exp !== "number") return MALFORMED;
  if (exp + graceSeconds <= nowSeconds) return fail("expired");
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
    expired: exp <= nowSeconds,
  };
}

/** HS256 with the gateway secret: the header without a kid, the MAC compared in constant time. */
function hmacScheme(secret: string | Uint8Array): { signer: Signer; verifierFor: VerifierFor } {
  const raw = typeof secret === "string" ? new TextEncoder().encode(secret) : secret;
  if (raw.byteLength < 32) throw new RangeError("the gateway secret must be at least 32 bytes");
  // A KeyObject made once: createHmac then skips copying the secret on every call.
  const key = createSecretKey(raw);
  const mac = (signingInput: string) => createHmac("sha256", key).update(signingInput).digest("base64url");
  const verifier: Verifier = {
    signatureLength: HMAC_SIGNATURE_LENGTH,
    // Comparing the canonical encodings compares the MACs (one spelling per 32 bytes), and refuses
    // the spellings a lenient decoder would have let through.
    verify: (signingInput, signature) =>
      timingSafeEqual(Buffer.from(signature, "latin1"), Buffer.from(mac(signingInput), "latin1")),
  };
  return { signer: { header: HEADER, sign: mac }, verifierFor: (h) => (headerIsOurs(h) ? verifier : undefined) };
}

/** P-256's group order n, and n/2 rounded down: an ES256 `s` above it is the high-S twin. */
const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const P256_HALF_ORDER = Buffer.from((P256_ORDER >> 1n).toString(16).padStart(64, "0"), "hex");
/** ES256 (r || s, 32 bytes each) and Ed25519 signatures are both 64 bytes: 86 base64url characters. */
const ASYMMETRIC_SIGNATURE_BYTES = 64;
const ASYMMETRIC_SIGNATURE_LENGTH = 86;

function signAsymmetric(alg: AsymmetricAlgorithm, key: KeyObject, signingInput: string): string {
  const data = Buffer.from(signingInput, "latin1");
  if (alg === "EdDSA") return signWith(null, data, key).toString("base64url");
  const signature = signWith("sha256", data, { key, dsaEncoding: "ieee-p1363" });
  const s = signature.subarray(32);
  if (Buffer.compare(s, P256_HALF_ORDER) > 0) {
    // (r, n - s) is the same signature's other valid form; write the low one, which is the only
    // one verify accepts.
    const low = P256_ORDER - BigInt(`0x${s.toString("hex")}`);
    Buffer.from(low.toString(16).padStart(64, "0"), "hex").copy(signature, 32);
  }
  return signature.toString("base64url");
}

function verifyAsymmetric(alg: AsymmetricAlgorithm, key: KeyObject, signingInput: string, signature: string): boolean {
  const bytes = decodeSegment(signature);
  if (!bytes || bytes.length !== ASYMMETRIC_SIGNATURE_BYTES) return false;
  const data = Buffer.from(signingInput, "latin1");
  if (alg === "EdDSA") return verify(null, data, key, bytes);
  if (Buffer.compare(bytes.subarray(32), P256_HALF_ORDER) > 0) return false;
  return verify("sha256", data, { key, dsaEncoding: "ieee-p1363" }, bytes);
}

/** Verified tokens remembered per service (about 10 MB of token strings at most). */
export const VERIFIED_KEPT = 20_000;

/** The header an asymmetric key signs with, as jose would spell it: alg, typ, kid. */
const headerOf = (alg: AsymmetricAlgorithm, kid: string) =>
  Buffer.from(JSON.stringify({ alg, typ: "JWT", kid })).toString("base64url");

/** ES256 or EdDSA with a key set: the active key signs, every key verifies the tokens naming it. */
function keyScheme(set: SigningKeySet): { signer: Signer; verifierFor: VerifierFor } {
  const byKid = new Map<string, { alg: AsymmetricAlgorithm; verifier: Verifier }>();
  const byHeader = new Map<string, Verifier>();
  // Tokens whose signature verified, whole: a public-key check costs 15-25 HMACs, and a fan polls
  // with the same queue token, and claims with the same access token, many times. Only the
  // signature is remembered (the exact string, so no other token can match); the claims, expiry
  // included, are checked on every call. The oldest go first past VERIFIED_KEPT.
  const verified = new Set<string>();
  const remember = (token: string) => {
    if (verified.size >= VERIFIED_KEPT) verified.delete(verified.values().next().value as string);
    verified.add(token);
  };
  for (const k of set.keys) {
    const verifier: Verifier = {
      signatureLength: ASYMMETRIC_SIGNATURE_LENGTH,
      verify: (signingInput, signature, token) => {
        if (verified.has(token)) return true;
        if (!verifyAsymmetric(k.alg, k.publicKey, signingInput, signature)) return false;
        remember(token);
        return true;
      },
    };
    byKid.set(k.kid, { alg: k.alg, verifier });
    byHeader.set(headerOf(k.alg, k.kid), verifier);
  }
  const { active } = set;
  const verifierFor: VerifierFor = (segment) => {
    // The headers this service writes, known by their bytes: no JSON parse on a poll.
    const known = byHeader.get(segment);
    if (known) return known;
    const header = jsonObject(segment);
    if (!header || Object.keys(header).length !== 3 || header.typ !== "JWT" || typeof header.kid !== "string") {
      return undefined;
    }
    const { alg } = header;
    if (alg !== "ES256" && alg !== "EdDSA") return undefined;
    const key = byKid.get(header.kid);
    if (!key) return UNKNOWN_KEY;
    // The kid's own algorithm only: the key is never used with another.
    return key.alg === alg ? key.verifier : undefined;
  };
  return {
    signer: {
      header: headerOf(active.alg, active.kid),
      sign: (signingInput) => signAsymmetric(active.alg, active.privateKey, signingInput),
    },
    verifierFor,
  };
}

export function createTokenService(options: TokenOptions): TokenService {
  const keySet =
    options.keys === undefined ? undefined : "active" in options.keys ? options.keys : loadSigningKeys(options.keys);
  if (!keySet && options.secret === undefined) throw new RangeError("tokens need the gateway secret or a key set");
  const { signer, verifierFor } = keySet ? keyScheme(keySet) : hmacScheme(options.secret as string | Uint8Array);
  const now = options.now ?? Date.now;
  const queueTtl = options.queueTokenTtlSeconds ?? 7 * 24 * 3600;
  const jwks = jwksOf(keySet);

  const sign = (payload: Record<string, string>, sub: string, iat: number, exp: number) =>
    signToken(signer, payload, sub, iat, exp);
  const verified: VerifiedPayloads = new Map();
  const verify = (token: string, kind: TokenKind, eventId: string, graceSeconds = 0) =>
    verifyToken(verifierFor, now, token, kind, eventId, verified, graceSeconds);

  return {
    algorithm: keySet ? keySet.alg : "HS256",
    jwks: () => jwks,

    signQueueToken({ fanId, eventId, epoch }) {
      const iat = Math.floor(now() / 1000);
      return sign({ kind: "queue", evt: eventId, ...(epoch ? { epoch } : {}) }, fanId, iat, iat + queueTtl);
    },

    signAccessToken({ fanId, eventId, sessionId, epoch, issuedAt, expiresAt }) {
      // The claims are deterministic for one session (iat = admission, exp = session expiry rounded
      // up to the second JWTs count in), and so is the token with HS256 and EdDSA (ES256 signs with
      // a random nonce; places.ts keeps one token per session either way). The session
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

    verifyAccessToken(token, eventId, options = {}) {
      const v = verify(token, "access", eventId, Math.max(0, options.expiredGraceSeconds ?? 0));
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
          ...(v.expired ? { expired: true as const } : {}),
        },
      };
    },
  };
}
