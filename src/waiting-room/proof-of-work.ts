/**
 * Proof of work on join (issue 18 item 3), checked without state.
 *
 * A challenge is a string the gateway signs and never stores:
 *
 *     pow1.<eventId>.<base64url(fanId)>.<bits>.<expiresAt ms>.<base64url(HMAC-SHA256)>
 *
 * the MAC over everything before its last dot, keyed by a key derived from the gateway secret
 * (HMAC-SHA256(GATEWAY_SECRET, "onsale-gateway proof-of-work v1")), so every gateway checks what
 * any other issued. The fan solves it by finding a `nonce` (a string of up to 64 characters) such
 * that SHA-256(challenge + ":" + nonce) starts with `bits` zero bits: about 2^bits hashes.
 *
 * Replays need no state either: a challenge is bound to one fan id and one event, and join is
 * idempotent per fan, so a solved challenge presented again only returns the place that fan
 * already has; another fan id cannot use it. It expires after CHALLENGE_TTL_MS.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { isEventId, isFanId } from "./keys.js";

export const POW_VERSION = "pow1";
/** The most bits an operator may ask for (2^26 hashes: seconds on a phone). */
export const MAX_POW_BITS = 26;
/** How long a challenge may be solved and presented. */
export const CHALLENGE_TTL_MS = 5 * 60_000;
const MAX_NONCE_LENGTH = 64;

/**
 * `too_few_bits`: the challenge asks less than the room does now (the setting was raised since it
 * was issued); `no_work`: the nonce does not do the challenge's work.
 */
export type ProofFailure =
  | "malformed"
  | "bad_mac"
  | "expired"
  | "wrong_fan"
  | "wrong_event"
  | "too_few_bits"
  | "no_work";

export type ProofCheck = { ok: true; bits: number } | { ok: false; reason: ProofFailure };

export interface Challenge {
  challenge: string;
  bits: number;
  expiresAt: number;
}

export interface ProofOfWork {
  issueChallenge(eventId: string, fanId: string, bits: number, now?: number): Challenge;
  /**
   * The challenge's MAC, expiry, its binding to this fan and event, and its work. `minBits`, when
   * given, refuses a challenge issued for fewer bits (the setting was raised since).
   */
  checkProof(
    challenge: string,
    nonce: string,
    fanId: string,
    eventId: string,
    now?: number,
    minBits?: number,
  ): ProofCheck;
}

export function powKey(gatewaySecret: string | Uint8Array): Buffer {
  return createHmac("sha256", gatewaySecret).update("onsale-gateway proof-of-work v1").digest();
}

const b64url = (s: string) => Buffer.from(s, "utf8").toString("base64url");

function macOf(key: Buffer, body: string): string {
  return createHmac("sha256", key).update(body).digest("base64url");
}

/** Leading zero bits of a digest. */
export function leadingZeroBits(digest: Uint8Array): number {
  let n = 0;
  for (const byte of digest) {
    if (byte === 0) {
      n += 8;
      continue;
    }
    return n + Math.clz32(byte) - 24;
  }
  return n;
}

export function workOf(challenge: string, nonce: string): number {
  return leadingZeroBits(createHash("sha256").update(`${challenge}:${nonce}`).digest());
}

/** Tries nonces 0, 1, 2, ... (in base 36) until one does the work; for tests and the load driver. */
export function solveChallenge(challenge: string, bits: number): string {
  for (let i = 0; ; i++) {
    const nonce = i.toString(36);
    if (workOf(challenge, nonce) >= bits) return nonce;
  }
}

export function createProofOfWork(gatewaySecret: string | Uint8Array): ProofOfWork {
  const key = powKey(gatewaySecret);
  return {
    issueChallenge(eventId, fanId, bits, now = Date.now()) {
      if (!isEventId(eventId)) throw new RangeError(`invalid event id: ${JSON.stringify(eventId)}`);
      if (!Number.isInteger(bits) || bits < 0 || bits > MAX_POW_BITS) throw new RangeError(`invalid bits: ${bits}`);
      const expiresAt = now + CHALLENGE_TTL_MS;
      const body = `${POW_VERSION}.${eventId}.${b64url(fanId)}.${bits}.${expiresAt}`;
      return { challenge: `${body}.${macOf(key, body)}`, bits, expiresAt };
    },

    checkProof(challenge, nonce, fanId, eventId, now = Date.now(), minBits = 0) {
      if (typeof challenge !== "string" || typeof nonce !== "string") return { ok: false, reason: "malformed" };
      if (challenge.length > 512 || nonce.length === 0 || nonce.length > MAX_NONCE_LENGTH) {
        return { ok: false, reason: "malformed" };
      }
      const parts = challenge.split(".");
      if (parts.length !== 6 || parts[0] !== POW_VERSION) return { ok: false, reason: "malformed" };
      const [, evt = "", fan = "", bitsText = "", expText = "", mac = ""] = parts;
      const body = challenge.slice(0, challenge.lastIndexOf("."));
      const expected = Buffer.from(macOf(key, body));
      const given = Buffer.from(mac);
      if (given.length !== expected.length || !timingSafeEqual(given, expected))
        return { ok: false, reason: "bad_mac" };
      // Signed by this gateway, so the fields are well formed; checked anyway.
      const bits = Number(bitsText);
      const expiresAt = Number(expText);
      if (!Number.isInteger(bits) || !Number.isInteger(expiresAt)) return { ok: false, reason: "malformed" };
      if (evt !== eventId) return { ok: false, reason: "wrong_event" };
      if (!isFanId(fanId) || fan !== b64url(fanId)) return { ok: false, reason: "wrong_fan" };
      if (now > expiresAt) return { ok: false, reason: "expired" };
      if (bits < minBits) return { ok: false, reason: "too_few_bits" };
      if (workOf(challenge, nonce) < bits) return { ok: false, reason: "no_work" };
      return { ok: true, bits };
    },
  };
}
