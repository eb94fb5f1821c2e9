/**
 * Queue tokens and access tokens: HS256 JWTs signed with the gateway secret. They verify without
 * Redis. The `kind` claim keeps them apart: a queue token is never accepted where an access token
 * is asked for, nor the reverse, and each names one event.
 *
 * Claims: `iss` "onsale-gateway", `kind` "queue" | "access", `sub` fanId, `evt` eventId, `iat`,
 * `exp`, `epoch` (the waiting room's epoch when the token was issued; absent for a room created
 * before epochs existed); access tokens add `sid` (the session id that isSessionActive checks on
 * claim paths).
 */
import { webcrypto } from "node:crypto";
import { SignJWT, jwtVerify } from "jose";

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
  signQueueToken(input: { fanId: string; eventId: string; epoch?: string | undefined }): Promise<string>;
  signAccessToken(input: {
    fanId: string;
    eventId: string;
    sessionId: string;
    epoch?: string | undefined;
    issuedAt: Date;
    expiresAt: Date;
  }): Promise<string>;
  verifyQueueToken(token: string, eventId: string): Promise<TokenCheck<QueueTokenClaims>>;
  verifyAccessToken(token: string, eventId: string): Promise<TokenCheck<AccessTokenClaims>>;
}

export interface TokenOptions {
  /** The gateway secret: at least 32 bytes. */
  secret: string | Uint8Array;
  /** How long a queue token is valid; default 7 days (a pre-queue may open days ahead). */
  queueTokenTtlSeconds?: number;
  /** The clock, in ms since the epoch; tests pass their own. */
  now?: () => number;
}

function failureOf(err: unknown): TokenFailure {
  const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : "";
  if (code === "ERR_JWT_EXPIRED") return "expired";
  if (code === "ERR_JWS_SIGNATURE_VERIFICATION_FAILED") return "bad_signature";
  return "malformed";
}

export function createTokenService(options: TokenOptions): TokenService {
  const raw = typeof options.secret === "string" ? new TextEncoder().encode(options.secret) : options.secret;
  if (raw.byteLength < 32) throw new RangeError("the gateway secret must be at least 32 bytes");
  // Imported once: signing with a CryptoKey is several times faster than with raw bytes, which
  // jose would import again on every call.
  let imported: Promise<webcrypto.CryptoKey> | undefined;
  const key = () =>
    (imported ??= webcrypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]));
  const now = options.now ?? Date.now;
  const queueTtl = options.queueTokenTtlSeconds ?? 7 * 24 * 3600;

  async function verify(token: string, kind: TokenKind, eventId: string) {
    try {
      const { payload } = await jwtVerify(token, await key(), {
        algorithms: ["HS256"],
        issuer: TOKEN_ISSUER,
        currentDate: new Date(now()),
        requiredClaims: ["sub", "iat", "exp"],
      });
      const { sub, evt, sid, iat, exp, epoch } = payload;
      if (typeof sub !== "string" || typeof evt !== "string" || !iat || !exp) {
        return { ok: false as const, reason: "malformed" as const };
      }
      if (epoch !== undefined && typeof epoch !== "string") return { ok: false as const, reason: "malformed" as const };
      // Issued in the future (past the clock skew between gateways and Redis): not ours.
      if (iat * 1000 > now() + MAX_CLOCK_SKEW_MS) return { ok: false as const, reason: "malformed" as const };
      if (payload.kind !== kind) return { ok: false as const, reason: "wrong_kind" as const };
      if (evt !== eventId) return { ok: false as const, reason: "wrong_event" as const };
      return {
        ok: true as const,
        fanId: sub,
        eventId: evt,
        sessionId: typeof sid === "string" ? sid : undefined,
        epoch,
        issuedAt: new Date(iat * 1000),
        expiresAt: new Date(exp * 1000),
      };
    } catch (err) {
      return { ok: false as const, reason: failureOf(err) };
    }
  }

  return {
    async signQueueToken({ fanId, eventId, epoch }) {
      const iat = Math.floor(now() / 1000);
      return new SignJWT({ kind: "queue", evt: eventId, ...(epoch ? { epoch } : {}) })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setIssuer(TOKEN_ISSUER)
        .setSubject(fanId)
        .setIssuedAt(iat)
        .setExpirationTime(iat + queueTtl)
        .sign(await key());
    },

    async signAccessToken({ fanId, eventId, sessionId, epoch, issuedAt, expiresAt }) {
      // Deterministic for one session (iat = admission, exp = session expiry rounded up to the
      // second JWTs count in): every poll of an admitted fan returns the same token. The session
      // in Redis stays the authority (isSessionActive); the token never expires before it.
      return new SignJWT({ kind: "access", evt: eventId, sid: sessionId, ...(epoch ? { epoch } : {}) })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setIssuer(TOKEN_ISSUER)
        .setSubject(fanId)
        .setIssuedAt(Math.floor(issuedAt.getTime() / 1000))
        .setExpirationTime(Math.ceil(expiresAt.getTime() / 1000))
        .sign(await key());
    },

    async verifyQueueToken(token, eventId) {
      const v = await verify(token, "queue", eventId);
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

    async verifyAccessToken(token, eventId) {
      const v = await verify(token, "access", eventId);
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
