/**
 * The token service signs and verifies with node:crypto by hand (src/waiting-room/tokens.ts).
 * These tests hold it to jose, which it replaced: jose's tokens verify here and ours verify with
 * jose, byte for byte the same; every token a reference built on jose's `jwtVerify` (with the
 * options the old service gave it) refuses is refused here with the same reason; and the few
 * tokens jose let through that the hand-written check refuses on purpose are listed. No I/O.
 */
import fc from "fast-check";
import { SignJWT, UnsecuredJWT, jwtVerify } from "jose";
import { describe, expect, it } from "vitest";
import { createTokenService, TOKEN_ISSUER } from "../../src/waiting-room/index.js";
import { MAX_CLOCK_SKEW_MS, type TokenFailure, type TokenKind } from "../../src/waiting-room/tokens.js";

const SECRET = "tokens-jose-test-secret-0123456789abcdef";
const key = new TextEncoder().encode(SECRET);
const NOW = Date.UTC(2030, 0, 1, 12, 0, 0, 500);
const nowSeconds = Math.floor(NOW / 1000);
const tokens = createTokenService({ secret: SECRET, now: () => NOW });
const HS256 = { alg: "HS256", typ: "JWT" };

const b64 = (value: unknown) =>
  Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64url");

/** The verdict of the old service: jose's jwtVerify with its options, then its own claim checks. */
async function joseVerdict(token: string, kind: TokenKind, eventId: string): Promise<"ok" | TokenFailure> {
  try {
    const { payload } = await jwtVerify(token, key, {
      algorithms: ["HS256"],
      issuer: TOKEN_ISSUER,
      currentDate: new Date(NOW),
      requiredClaims: ["sub", "iat", "exp"],
    });
    const { sub, evt, sid, iat, exp, epoch } = payload;
    if (typeof sub !== "string" || typeof evt !== "string" || !iat || !exp) return "malformed";
    if (epoch !== undefined && typeof epoch !== "string") return "malformed";
    if (iat * 1000 > NOW + MAX_CLOCK_SKEW_MS) return "malformed";
    if (payload.kind !== kind) return "wrong_kind";
    if (evt !== eventId) return "wrong_event";
    if (kind === "access" && typeof sid !== "string") return "malformed";
    return "ok";
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ERR_JWT_EXPIRED") return "expired";
    if (code === "ERR_JWS_SIGNATURE_VERIFICATION_FAILED") return "bad_signature";
    return "malformed";
  }
}

function ourVerdict(token: string, kind: TokenKind, eventId: string): "ok" | TokenFailure {
  const check = kind === "queue" ? tokens.verifyQueueToken(token, eventId) : tokens.verifyAccessToken(token, eventId);
  return check.ok ? "ok" : check.reason;
}

/** Any claims, any header, signed with the gateway secret by jose. */
function joseSign(claims: Record<string, unknown>, header: Record<string, unknown> = HS256): Promise<string> {
  return new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(key);
}

const queueClaims = {
  kind: "queue",
  evt: "finals",
  epoch: "e1",
  iss: TOKEN_ISSUER,
  sub: "alice",
  iat: nowSeconds - 10,
  exp: nowSeconds + 3_600,
};
const accessClaims = { ...queueClaims, kind: "access", sid: "abc.1" };

/** The old service's signing, verbatim (jose), for the byte-for-byte comparison. */
const oldSign = {
  queue: (fanId: string, eventId: string, epoch: string | undefined, iat: number, ttl: number) =>
    new SignJWT({ kind: "queue", evt: eventId, ...(epoch ? { epoch } : {}) })
      .setProtectedHeader(HS256)
      .setIssuer(TOKEN_ISSUER)
      .setSubject(fanId)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ttl)
      .sign(key),
  access: (fanId: string, eventId: string, sessionId: string, epoch: string | undefined, iat: Date, exp: Date) =>
    new SignJWT({ kind: "access", evt: eventId, sid: sessionId, ...(epoch ? { epoch } : {}) })
      .setProtectedHeader(HS256)
      .setIssuer(TOKEN_ISSUER)
      .setSubject(fanId)
      .setIssuedAt(Math.floor(iat.getTime() / 1000))
      .setExpirationTime(Math.ceil(exp.getTime() / 1000))
      .sign(key),
};

describe("tokens against jose", () => {
  it("sign the same bytes jose signed, and jose verifies them", async () => {
    for (const epoch of [undefined, "", "1712345678901-abc"]) {
      const queue = tokens.signQueueToken({ fanId: "alice", eventId: "finals", epoch });
      expect(queue).toBe(await oldSign.queue("alice", "finals", epoch, nowSeconds, 7 * 24 * 3600));
      const issuedAt = new Date(NOW - 1_234);
      const expiresAt = new Date(NOW + 600_001);
      const access = tokens.signAccessToken({
        fanId: "bob",
        eventId: "finals",
        sessionId: "s.1",
        epoch,
        issuedAt,
        expiresAt,
      });
      expect(access).toBe(await oldSign.access("bob", "finals", "s.1", epoch, issuedAt, expiresAt));
      const { payload, protectedHeader } = await jwtVerify(access, key, {
        algorithms: ["HS256"],
        issuer: TOKEN_ISSUER,
        currentDate: new Date(NOW),
      });
      expect(protectedHeader).toEqual(HS256);
      expect(payload).toMatchObject({ kind: "access", sub: "bob", evt: "finals", sid: "s.1" });
    }
    // Fan ids and event ids with characters JSON escapes and UTF-8 spreads over several bytes.
    const odd = tokens.signQueueToken({ fanId: 'ä"\\\u2028😀', eventId: "é" });
    expect(odd).toBe(await oldSign.queue('ä"\\\u2028😀', "é", undefined, nowSeconds, 7 * 24 * 3600));
    expect(tokens.verifyQueueToken(odd, "é")).toMatchObject({ ok: true, claims: { fanId: 'ä"\\\u2028😀' } });
  });

  it("verify what jose signed, with the claims jose read", async () => {
    const queue = tokens.verifyQueueToken(await joseSign(queueClaims), "finals");
    expect(queue).toEqual({
      ok: true,
      claims: {
        kind: "queue",
        fanId: "alice",
        eventId: "finals",
        epoch: "e1",
        issuedAt: new Date(queueClaims.iat * 1000),
        expiresAt: new Date(queueClaims.exp * 1000),
      },
    });
    const { epoch: _epoch, ...noEpoch } = accessClaims;
    const access = tokens.verifyAccessToken(await joseSign(noEpoch), "finals");
    expect(access).toMatchObject({ ok: true, claims: { kind: "access", sessionId: "abc.1", epoch: undefined } });
  });

  it("refuse each bad token with the reason jose's verification gave", async () => {
    const real = await joseSign(accessClaims);
    const [h, p, s] = real.split(".") as [string, string, string];
    const other = new TextEncoder().encode("another-secret-another-secret-another-secret");
    const cases: Record<string, string> = {
      empty: "",
      "one segment": "abc",
      "two segments": `${h}.${p}`,
      "four segments": `${real}.${s}`,
      "empty header": `.${p}.${s}`,
      "header not base64url": `${h}!.${p}.${s}`,
      "header not JSON": `${b64("{alg")}.${p}.${s}`,
      "header an array": `${b64([HS256])}.${p}.${s}`,
      "alg none (unsecured)": new UnsecuredJWT(accessClaims).encode(),
      "alg none with the real signature": `${b64({ alg: "none", typ: "JWT" })}.${p}.${s}`,
      "alg missing": `${b64({ typ: "JWT" })}.${p}.${s}`,
      "payload not base64url": `${h}.${p}*.${s}`,
      "payload not ASCII": `${h}.${p}é.${s}`,
      "signature not base64url": `${h}.${p}.${s.slice(0, -1)}+`,
      "signature empty": `${h}.${p}.`,
      "signature short": `${h}.${p}.${s.slice(0, -4)}`,
      "signature long": `${h}.${p}.${s}AAAA`,
      "signature of other bytes": `${h}.${b64({ ...accessClaims, sub: "mallory" })}.${s}`,
      "another secret": await new SignJWT(accessClaims).setProtectedHeader(HS256).sign(other),
      "payload not JSON": await signRaw(b64("{sub")),
      "payload not UTF-8": await signRaw(Buffer.from([0x7b, 0xff, 0x7d]).toString("base64url")),
      "payload an array": await signRaw(b64([accessClaims])),
      "payload null": await signRaw(b64("null")),
      "no iss": await joseSign(without(accessClaims, "iss")),
      "another iss": await joseSign({ ...accessClaims, iss: "someone-else" }),
      "no sub": await joseSign(without(accessClaims, "sub")),
      "sub a number": await joseSign({ ...accessClaims, sub: 7 }),
      "no iat": await joseSign(without(accessClaims, "iat")),
      "iat a string": await joseSign({ ...accessClaims, iat: "1" }),
      "iat zero": await joseSign({ ...accessClaims, iat: 0 }),
      "iat past the skew": await joseSign({ ...accessClaims, iat: nowSeconds + 61 }),
      "iat within the skew": await joseSign({ ...accessClaims, iat: nowSeconds + 59 }),
      "no exp": await joseSign(without(accessClaims, "exp")),
      "exp a string": await joseSign({ ...accessClaims, exp: String(nowSeconds + 60) }),
      "exp now": await joseSign({ ...accessClaims, exp: nowSeconds }),
      "exp a second ahead": await joseSign({ ...accessClaims, exp: nowSeconds + 1 }),
      "nbf ahead": await joseSign({ ...accessClaims, nbf: nowSeconds + 1 }),
      "nbf now": await joseSign({ ...accessClaims, nbf: nowSeconds }),
      "nbf a string": await joseSign({ ...accessClaims, nbf: "0" }),
      "nbf ahead and expired": await joseSign({ ...accessClaims, nbf: nowSeconds + 1, exp: nowSeconds - 1 }),
      "evt missing": await joseSign(without(accessClaims, "evt")),
      "another event": await joseSign({ ...accessClaims, evt: "semis" }),
      "a queue token": await joseSign(queueClaims),
      "kind missing": await joseSign(without(accessClaims, "kind")),
      "sid missing": await joseSign(without(accessClaims, "sid")),
      "sid a number": await joseSign({ ...accessClaims, sid: 1 }),
      "epoch a number": await joseSign({ ...accessClaims, epoch: 5 }),
      HS512: await signRaw(p, b64({ alg: "HS512", typ: "JWT" })),
      "crit unknown": await signRaw(p, b64({ ...HS256, crit: ["exp"], exp: 1 })),
      "crit empty": await signRaw(p, b64({ ...HS256, crit: [] })),
      "b64 false": await signRaw(p, b64({ ...HS256, crit: ["b64"], b64: false })),
      "the real token": real,
    };
    const seen = new Set<string>();
    for (const [name, token] of Object.entries(cases)) {
      const expected = await joseVerdict(token, "access", "finals");
      seen.add(expected);
      expect(`${name}: ${ourVerdict(token, "access", "finals")}`).toBe(`${name}: ${expected}`);
    }
    // The table reaches every outcome, so agreeing with it means something.
    expect([...seen].sort()).toEqual(["bad_signature", "expired", "malformed", "ok", "wrong_event", "wrong_kind"]);
  });

  /** A segment built with 0..3 characters of padding inside, the first whose length leaves a tail. */
  function withTail(build: (pad: string) => string): string {
    for (let n = 0; n < 4; n++) {
      const segment = build(" ".repeat(n));
      if (segment.length % 4 !== 0) return segment;
    }
    throw new Error("no length with a tail");
  }

  /** The segment with its last character's unused low bits set (a 2- or 3-character tail has some). */
  function nonCanonical(segment: string): string {
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    if (segment.length % 4 === 0) throw new Error("a segment with no unused bits");
    const last = alphabet.indexOf(segment.at(-1)!);
    return `${segment.slice(0, -1)}${alphabet[last + 1]}`;
  }

  it("refuse, on purpose, the few tokens jose let through: another header, a spelling that is not canonical", async () => {
    const real = await joseSign(accessClaims);
    const [h, p, s] = real.split(".") as [string, string, string];
    expect(h).toBe(b64(HS256));
    const lenient: Record<string, string> = {
      "crit b64 true": await signRaw(p, b64({ ...HS256, crit: ["b64"], b64: true })),
      "a kid": await joseSign(accessClaims, { ...HS256, kid: "k1" }),
      "no typ": await joseSign(accessClaims, { alg: "HS256" }),
      "typ jwt lowercase": await joseSign(accessClaims, { alg: "HS256", typ: "jwt" }),
      // The last character carries 4 bits of MAC and 2 unused bits (always 0, so the canonical
      // character is every fourth of the alphabet, and the next one differs only there): jose's
      // decoder ignored them.
      "signature's unused bits set": `${h}.${p}.${s.slice(0, -1)}${String.fromCharCode(s.charCodeAt(s.length - 1) + 1)}`,
      // jose's decoder dropped ASCII whitespace.
      "signature with a space": `${h}.${p}.${s.slice(0, 10)} ${s.slice(10)}`,
      "signature padded": `${h}.${p}.${s}=`,
      // The same for the payload, signed with the secret as it is spelled (a last character whose
      // unused bits are set, the next character of the alphabet): the bytes decode alike.
      "payload's unused bits set": await signRaw(
        nonCanonical(withTail((pad) => b64({ ...JSON.parse(Buffer.from(p, "base64url").toString()), pad }))),
      ),
      "header's unused bits set": await signRaw(
        p,
        nonCanonical(withTail((pad) => Buffer.from(`{"alg":"HS256",${pad}"typ":"JWT"}`).toString("base64url"))),
      ),
    };
    for (const [name, token] of Object.entries(lenient)) {
      expect(`${name}: ${await joseVerdict(token, "access", "finals")}`).toBe(`${name}: ok`);
      expect(`${name}: ${ourVerdict(token, "access", "finals")}`).not.toBe(`${name}: ok`);
    }
    // The header's members in another order is still exactly HS256/JWT.
    const reordered = await signRaw(p, b64({ typ: "JWT", alg: "HS256" }));
    expect(ourVerdict(reordered, "access", "finals")).toBe("ok");
  });

  it("agree with jose on any claims set signed with the secret (property)", async () => {
    const time = fc.oneof(
      fc.integer({ min: nowSeconds - 3, max: nowSeconds + 63 }),
      fc.constantFrom(0, -1, 1e300, 1.5),
      fc.constantFrom("1", null, true),
    );
    const claim = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 4 });
    const claims = fc.record({
      kind: claim(fc.constantFrom("queue", "access", "other", 1)),
      evt: claim(fc.constantFrom("finals", "semis", 3)),
      sid: claim(fc.constantFrom("s.1", 2)),
      epoch: claim(fc.constantFrom("e", "", 9)),
      iss: claim(fc.constantFrom(TOKEN_ISSUER, "x", 1)),
      sub: claim(fc.constantFrom("alice", "", 4)),
      iat: claim(time),
      exp: claim(time),
      nbf: claim(time),
    });
    await fc.assert(
      fc.asyncProperty(claims, fc.constantFrom<TokenKind>("queue", "access"), async (c, kind) => {
        const defined = Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined));
        const token = await signRaw(b64(defined));
        expect(ourVerdict(token, kind, "finals")).toBe(await joseVerdict(token, kind, "finals"));
      }),
      { numRuns: 500 },
    );
  });

  it("never accept a mutation of a valid token (property)", () => {
    const real = tokens.signAccessToken({
      fanId: "alice",
      eventId: "finals",
      sessionId: "abc.1",
      issuedAt: new Date(NOW),
      expiresAt: new Date(NOW + 600_000),
    });
    expect(ourVerdict(real, "access", "finals")).toBe("ok");
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ é\u0000";
    const char = fc.integer({ min: 0, max: alphabet.length - 1 }).map((i) => alphabet[i] as string);
    const at = fc.integer({ min: 0, max: real.length });
    const mutation = fc.oneof(
      fc.tuple(at, char).map(([i, c]) => real.slice(0, i) + c + real.slice(i + 1)), // replace
      fc.tuple(at, char).map(([i, c]) => real.slice(0, i) + c + real.slice(i)), // insert
      at.map((i) => real.slice(0, i) + real.slice(i + 1)), // delete
      fc.tuple(at, at).map(([i, j]) => real.slice(0, Math.min(i, j)) + real.slice(Math.max(i, j))), // cut
      fc.tuple(at, fc.integer({ min: 0, max: 63 })).map(([i, bits]) => {
        // flip bits of one character within the base64url alphabet
        const digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        const d = digits.indexOf(real[i] ?? "");
        return d < 0 ? real : real.slice(0, i) + digits[(d ^ bits) & 63] + real.slice(i + 1);
      }),
    );
    fc.assert(
      fc.property(mutation, (token) => {
        fc.pre(token !== real);
        const check = tokens.verifyAccessToken(token, "finals");
        expect(check.ok).toBe(false);
      }),
      { numRuns: 5_000 },
    );
  });
});

function without(claims: Record<string, unknown>, name: string): Record<string, unknown> {
  const { [name]: _dropped, ...rest } = claims;
  return rest;
}

/** An HS256 signature over the given segments, whatever they hold (jose only signs JSON objects). */
async function signRaw(payloadSegment: string, headerSegment: string = b64(HS256)): Promise<string> {
  const { createHmac } = await import("node:crypto");
  const input = `${headerSegment}.${payloadSegment}`;
  return `${input}.${createHmac("sha256", key).update(input).digest("base64url")}`;
}
