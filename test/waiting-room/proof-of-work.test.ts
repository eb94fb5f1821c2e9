/** The stateless proof-of-work challenge (src/waiting-room/proof-of-work.ts), without Redis. */
import { describe, expect, it } from "vitest";
import {
  CHALLENGE_TTL_MS,
  createProofOfWork,
  leadingZeroBits,
  MAX_POW_BITS,
  solveChallenge,
  workOf,
} from "../../src/waiting-room/proof-of-work.js";

const SECRET = "unit-test-gateway-secret-0123456789-abcdef";
const pow = createProofOfWork(SECRET);
const NOW = 1_800_000_000_000;

describe("proof of work", () => {
  it("counts leading zero bits", () => {
    expect(leadingZeroBits(Uint8Array.from([0x80, 0]))).toBe(0);
    expect(leadingZeroBits(Uint8Array.from([0x01, 0xff]))).toBe(7);
    expect(leadingZeroBits(Uint8Array.from([0, 0x10]))).toBe(11);
    expect(leadingZeroBits(Uint8Array.from([0, 0]))).toBe(16);
  });

  it("accepts a solved challenge for its fan and event, and reports its bits", () => {
    const { challenge, bits, expiresAt } = pow.issueChallenge("evt1", "fan_1", 12, NOW);
    expect(bits).toBe(12);
    expect(expiresAt).toBe(NOW + CHALLENGE_TTL_MS);
    expect(challenge.startsWith("pow1.evt1.")).toBe(true);
    const nonce = solveChallenge(challenge, 12);
    expect(workOf(challenge, nonce)).toBeGreaterThanOrEqual(12);
    expect(pow.checkProof(challenge, nonce, "fan_1", "evt1", NOW + 1)).toEqual({ ok: true, bits: 12 });
  });

  it("refuses a nonce that does not do the work", () => {
    const { challenge } = pow.issueChallenge("evt1", "fan_1", 16, NOW);
    // a nonce whose hash has fewer than 16 zero bits
    let nonce = "x";
    for (let i = 0; workOf(challenge, nonce) >= 16; i++) nonce = `x${i}`;
    expect(pow.checkProof(challenge, nonce, "fan_1", "evt1", NOW)).toEqual({ ok: false, reason: "no_work" });
  });

  it("refuses a tampered challenge: another bits count, fan or expiry under the same mac", () => {
    const { challenge } = pow.issueChallenge("evt1", "fan_1", 8, NOW);
    const parts = challenge.split(".");
    const lowered = [...parts.slice(0, 3), "0", ...parts.slice(4)].join(".");
    expect(pow.checkProof(lowered, "0", "fan_1", "evt1", NOW)).toEqual({ ok: false, reason: "bad_mac" });
    const later = [...parts.slice(0, 4), String(NOW + 10 * CHALLENGE_TTL_MS), parts[5]].join(".");
    expect(pow.checkProof(later, "0", "fan_1", "evt1", NOW)).toEqual({ ok: false, reason: "bad_mac" });
    const flipped = `${challenge.slice(0, -1)}${challenge.endsWith("A") ? "B" : "A"}`;
    expect(pow.checkProof(flipped, solveChallenge(flipped, 8), "fan_1", "evt1", NOW)).toEqual({
      ok: false,
      reason: "bad_mac",
    });
    // signed by another gateway secret
    const other = createProofOfWork("another-gateway-secret-0123456789-abcdef").issueChallenge("evt1", "fan_1", 1, NOW);
    expect(pow.checkProof(other.challenge, solveChallenge(other.challenge, 1), "fan_1", "evt1", NOW)).toEqual({
      ok: false,
      reason: "bad_mac",
    });
  });

  it("binds a challenge to one fan and one event", () => {
    const { challenge } = pow.issueChallenge("evt1", "fan_1", 4, NOW);
    const nonce = solveChallenge(challenge, 4);
    expect(pow.checkProof(challenge, nonce, "fan_2", "evt1", NOW)).toEqual({ ok: false, reason: "wrong_fan" });
    expect(pow.checkProof(challenge, nonce, "fan_1", "evt2", NOW)).toEqual({ ok: false, reason: "wrong_event" });
  });

  it("refuses an expired challenge", () => {
    const { challenge, expiresAt } = pow.issueChallenge("evt1", "fan_1", 4, NOW);
    const nonce = solveChallenge(challenge, 4);
    expect(pow.checkProof(challenge, nonce, "fan_1", "evt1", expiresAt).ok).toBe(true);
    expect(pow.checkProof(challenge, nonce, "fan_1", "evt1", expiresAt + 1)).toEqual({ ok: false, reason: "expired" });
  });

  it("refuses a challenge issued for fewer bits than asked now", () => {
    const { challenge } = pow.issueChallenge("evt1", "fan_1", 6, NOW);
    const nonce = solveChallenge(challenge, 6);
    expect(pow.checkProof(challenge, nonce, "fan_1", "evt1", NOW, 6).ok).toBe(true);
    expect(pow.checkProof(challenge, nonce, "fan_1", "evt1", NOW, 7)).toEqual({ ok: false, reason: "too_few_bits" });
  });

  it("answers malformed input without throwing", () => {
    for (const [challenge, nonce] of [
      ["", "1"],
      ["pow1.a.b", "1"],
      ["pow2.evt1.ZmFu.1.1.x", "1"],
      ["pow1.evt1.ZmFu.1.1.x", ""],
      ["pow1.evt1.ZmFu.1.1.x", "n".repeat(65)],
      ["x".repeat(600), "1"],
    ] as const) {
      const check = pow.checkProof(challenge, nonce, "fan_1", "evt1", NOW);
      expect(check.ok).toBe(false);
    }
    expect(() => pow.issueChallenge("evt1", "f", MAX_POW_BITS + 1, NOW)).toThrow(RangeError);
    expect(() => pow.issueChallenge("bad.id", "f", 1, NOW)).toThrow(RangeError);
  });
});
