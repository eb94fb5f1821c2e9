/**
 * Tokens signed with a key set (TOKEN_ALG ES256 or EdDSA, src/waiting-room/signing-keys.ts): jose
 * verifies them with the published public keys alone; a rotation keeps old tokens valid while their
 * key is verify-only and refuses them once it is gone; the header is held to the key its kid names
 * (no HS256 with the public key as the secret, no `none`, no kid of another algorithm, no unknown
 * member); an ES256 signature has one spelling. No I/O.
 */
import { createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import fc from "fast-check";
import { createLocalJWKSet, importJWK, jwtVerify, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import {
  type AsymmetricAlgorithm,
  createTokenService,
  generateSigningKey,
  loadSigningKeys,
  type SigningKeyInput,
  TOKEN_ISSUER,
} from "../../src/waiting-room/index.js";
import type { TokenService } from "../../src/waiting-room/tokens.js";

const NOW = Date.UTC(2030, 0, 1, 12, 0, 0, 500);
const nowSeconds = Math.floor(NOW / 1000);
const SECRET = "tokens-keys-test-secret-0123456789abcdef";
const ALGS: AsymmetricAlgorithm[] = ["ES256", "EdDSA"];

const b64 = (value: unknown) =>
  Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64url");
const segments = (token: string) => token.split(".") as [string, string, string];
const headerOf = (token: string) => JSON.parse(Buffer.from(segments(token)[0], "base64url").toString());

const access = {
  fanId: "alice",
  eventId: "finals",
  sessionId: "abc.1",
  epoch: "e1",
  issuedAt: new Date(NOW - 1_000),
  expiresAt: new Date(NOW + 600_000),
};

function service(keys: readonly SigningKeyInput[]): TokenService {
  return createTokenService({ keys, now: () => NOW });
}

const verifyOnly = (key: SigningKeyInput): SigningKeyInput => ({ ...key, state: "verify-only" });

/** What jose says of a token, given only the service's published JWKS. */
async function joseVerdict(token: string, jwks: ReturnType<TokenService["jwks"]>): Promise<string> {
  try {
    const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(jwks), {
      issuer: TOKEN_ISSUER,
      currentDate: new Date(NOW),
      algorithms: ["ES256", "EdDSA"],
    });
    return `ok ${protectedHeader.kid} ${payload.kind} ${payload.sub}`;
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

/** P-256's group order: (r, n - s) is the other valid form of an ES256 signature (r, s). */
const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
function otherForm(token: string): string {
  const [h, p, s] = segments(token);
  const sig = Buffer.from(s, "base64url");
  const flipped = P256_ORDER - BigInt(`0x${sig.subarray(32).toString("hex")}`);
  Buffer.from(flipped.toString(16).padStart(64, "0"), "hex").copy(sig, 32);
  return `${h}.${p}.${sig.toString("base64url")}`;
}

describe.each(ALGS)("%s tokens", (alg) => {
  const key = generateSigningKey(alg, `${alg}-1`);
  const tokens = service([key]);

  it("carry the kid, verify here, and verify with jose from the JWKS alone", async () => {
    expect(tokens.algorithm).toBe(alg);
    const queue = tokens.signQueueToken({ fanId: "alice", eventId: "finals", epoch: "e1" });
    const acc = tokens.signAccessToken(access);
    for (const t of [queue, acc]) expect(headerOf(t)).toEqual({ alg, typ: "JWT", kid: `${alg}-1` });
    expect(tokens.verifyQueueToken(queue, "finals")).toEqual({
      ok: true,
      claims: {
        kind: "queue",
        fanId: "alice",
        eventId: "finals",
        epoch: "e1",
        issuedAt: new Date(nowSeconds * 1000),
        expiresAt: new Date((nowSeconds + 7 * 24 * 3600) * 1000),
      },
    });
    expect(tokens.verifyAccessToken(acc, "finals")).toMatchObject({ ok: true, claims: { sessionId: "abc.1" } });

    const jwks = tokens.jwks();
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kid: `${alg}-1`, alg, use: "sig", kty: alg === "ES256" ? "EC" : "OKP" });
    expect(JSON.stringify(jwks)).not.toContain('"d"'); // no private part
    expect(await joseVerdict(queue, jwks)).toBe(`ok ${alg}-1 queue alice`);
    expect(await joseVerdict(acc, jwks)).toBe(`ok ${alg}-1 access alice`);
    // and jose, holding only the public JWK, reads the claims the service wrote
    const { payload } = await jwtVerify(acc, await importJWK(jwks.keys[0]!, alg), { currentDate: new Date(NOW) });
    expect(payload).toMatchObject({ kind: "access", evt: "finals", sid: "abc.1", epoch: "e1", iss: TOKEN_ISSUER });
  });

  it("verify what jose signed with the same private key", async () => {
    const privateKey = createPrivateKey(key.privateKeyPem!);
    const joseToken = await new SignJWT({ kind: "access", evt: "finals", sid: "s.9" })
      .setProtectedHeader({ alg, typ: "JWT", kid: key.kid })
      .setIssuer(TOKEN_ISSUER)
      .setSubject("bob")
      .setIssuedAt(nowSeconds)
      .setExpirationTime(nowSeconds + 60)
      .sign(privateKey);
    let token = joseToken;
    // jose writes whichever of an ES256 signature's two forms OpenSSL gave; the service takes the
    // low-S one only (its own signer writes that one).
    if (alg === "ES256" && !tokens.verifyAccessToken(token, "finals").ok) {
      expect(tokens.verifyAccessToken(token, "finals")).toEqual({ ok: false, reason: "bad_signature" });
      token = otherForm(token);
    }
    expect(tokens.verifyAccessToken(token, "finals")).toMatchObject({
      ok: true,
      claims: { fanId: "bob", sessionId: "s.9" },
    });
  });

  it("refuse a forged signature, a tampered payload, another key with the same kid, and the wrong kind or event", () => {
    const token = tokens.signAccessToken(access);
    const [h, p, s] = segments(token);
    const tampered = b64({ ...JSON.parse(Buffer.from(p, "base64url").toString()), sub: "mallory" });
    expect(tokens.verifyAccessToken(`${h}.${tampered}.${s}`, "finals")).toEqual({ ok: false, reason: "bad_signature" });
    const impostor = service([generateSigningKey(alg, key.kid)]);
    expect(tokens.verifyAccessToken(impostor.signAccessToken(access), "finals")).toEqual({
      ok: false,
      reason: "bad_signature",
    });
    expect(tokens.verifyAccessToken(`${h}.${p}.${s.slice(0, -2)}`, "finals")).toEqual({
      ok: false,
      reason: "bad_signature",
    });
    expect(tokens.verifyAccessToken(`${h}.${p}.${s}AAAA`, "finals")).toEqual({ ok: false, reason: "bad_signature" });
    // the 86th character carries 2 bits that encode nothing: only the spelling with them zero
    const loose = `${h}.${p}.${s.slice(0, -1)}${String.fromCharCode(s.charCodeAt(s.length - 1) + 1)}`;
    expect(tokens.verifyAccessToken(loose, "finals")).toEqual({ ok: false, reason: "bad_signature" });
    expect(tokens.verifyQueueToken(token, "finals")).toEqual({ ok: false, reason: "wrong_kind" });
    expect(tokens.verifyAccessToken(token, "semis")).toEqual({ ok: false, reason: "wrong_event" });
    const expired = tokens.signAccessToken({ ...access, expiresAt: new Date(NOW - 1_000) });
    expect(tokens.verifyAccessToken(expired, "finals")).toEqual({ ok: false, reason: "expired" });
  });

  it("refuse alg confusion, alg none, an unknown kid and a header that is not exactly alg/typ/kid", () => {
    const token = tokens.signAccessToken(access);
    const [, p] = segments(token);
    const publicPem = Buffer.from(createPublicKey(key.privateKeyPem!).export({ format: "pem", type: "spki" }));
    const jwk = tokens.jwks().keys[0]!;
    const hmacWith = (secret: Buffer | string, header: Record<string, unknown>) => {
      const input = `${b64(header)}.${p}`;
      return `${input}.${createHmac("sha256", secret).update(input).digest("base64url")}`;
    };
    // Signed by the real key over the header as given, so only the header can be what is refused.
    const resign = (header: Record<string, unknown>) => {
      const input = `${b64(header)}.${p}`;
      const privateKey = createPrivateKey(key.privateKeyPem!);
      const sig =
        alg === "EdDSA"
          ? sign(null, Buffer.from(input), privateKey)
          : sign("sha256", Buffer.from(input), { key: privateKey, dsaEncoding: "ieee-p1363" });
      const signed = `${input}.${sig.toString("base64url")}`;
      const low = BigInt(`0x${sig.subarray(32).toString("hex")}`) <= P256_ORDER >> 1n;
      return alg === "ES256" && !low ? otherForm(signed) : signed;
    };
    const cases: Record<string, [string, string]> = {
      // The classic: the public key, which anyone has, taken as an HMAC secret.
      "HS256 with the public key PEM as secret, the key's kid": [
        hmacWith(publicPem, { alg: "HS256", typ: "JWT", kid: key.kid }),
        "malformed",
      ],
      "HS256 with the public key PEM as secret, no kid": [
        hmacWith(publicPem, { alg: "HS256", typ: "JWT" }),
        "malformed",
      ],
      "HS256 with the JWK's x as secret": [
        hmacWith(Buffer.from(jwk.x, "base64url"), { alg: "HS256", typ: "JWT", kid: key.kid }),
        "malformed",
      ],
      "HS256 with the gateway secret (an HS256 gateway's token)": [
        createTokenService({ secret: SECRET, now: () => NOW }).signAccessToken(access),
        "malformed",
      ],
      "alg none, no signature": [`${b64({ alg: "none", typ: "JWT", kid: key.kid })}.${p}.`, "malformed"],
      "alg none, the real signature": [resign({ alg: "none", typ: "JWT", kid: key.kid }), "malformed"],
      "the other algorithm with this kid": [
        resign({ alg: alg === "ES256" ? "EdDSA" : "ES256", typ: "JWT", kid: key.kid }),
        "malformed",
      ],
      "no kid": [resign({ alg, typ: "JWT" }), "malformed"],
      "kid a number": [resign({ alg, typ: "JWT", kid: 1 }), "malformed"],
      "an unknown kid": [resign({ alg, typ: "JWT", kid: "retired" }), "bad_signature"],
      crit: [resign({ alg, typ: "JWT", kid: key.kid, crit: ["exp"] }), "malformed"],
      "jku (a key from elsewhere)": [resign({ alg, typ: "JWT", kid: key.kid, jku: "https://evil/jwks" }), "malformed"],
      "no typ": [resign({ alg, kid: key.kid }), "malformed"],
      "members in another order": [resign({ kid: key.kid, typ: "JWT", alg }), "ok"],
      "the header as the service writes it": [resign({ alg, typ: "JWT", kid: key.kid }), "ok"],
    };
    for (const [name, [t, expected]] of Object.entries(cases)) {
      const check = tokens.verifyAccessToken(t, "finals");
      expect(`${name}: ${check.ok ? "ok" : check.reason}`).toBe(`${name}: ${expected}`);
    }
  });

  it("check the claims of a token verified before on every call: expiry, kind, event; a tampered copy is refused", () => {
    let clock = NOW;
    const clocked = createTokenService({ keys: [key], now: () => clock });
    const token = clocked.signAccessToken({ ...access, expiresAt: new Date(NOW + 10_000) });
    expect(clocked.verifyAccessToken(token, "finals").ok).toBe(true); // remembered from here
    expect(clocked.verifyAccessToken(token, "finals").ok).toBe(true);
    expect(clocked.verifyAccessToken(token, "semis")).toEqual({ ok: false, reason: "wrong_event" });
    expect(clocked.verifyQueueToken(token, "finals")).toEqual({ ok: false, reason: "wrong_kind" });
    const [h, p, s] = segments(token);
    const tampered = b64({ ...JSON.parse(Buffer.from(p, "base64url").toString()), sub: "mallory" });
    expect(clocked.verifyAccessToken(`${h}.${tampered}.${s}`, "finals")).toEqual({
      ok: false,
      reason: "bad_signature",
    });
    clock = NOW + 11_000;
    expect(clocked.verifyAccessToken(token, "finals")).toEqual({ ok: false, reason: "expired" });
  });

  it("never accept a mutation of a valid token (property)", () => {
    const real = tokens.signAccessToken(access);
    // verified first, so the service remembers it: no mutation may ride on that
    expect(tokens.verifyAccessToken(real, "finals").ok).toBe(true);
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ é";
    const char = fc.integer({ min: 0, max: alphabet.length - 1 }).map((i) => alphabet[i] as string);
    const at = fc.integer({ min: 0, max: real.length });
    const mutation = fc.oneof(
      fc.tuple(at, char).map(([i, c]) => real.slice(0, i) + c + real.slice(i + 1)),
      fc.tuple(at, char).map(([i, c]) => real.slice(0, i) + c + real.slice(i)),
      at.map((i) => real.slice(0, i) + real.slice(i + 1)),
    );
    fc.assert(
      fc.property(mutation, (token) => {
        fc.pre(token !== real);
        expect(tokens.verifyAccessToken(token, "finals").ok).toBe(false);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("ES256 signatures", () => {
  it("are always the low-S form, and the high-S twin jose accepts is refused", async () => {
    const tokens = service([generateSigningKey("ES256", "k")]);
    let twinsSeen = 0;
    for (let i = 0; i < 40; i++) {
      const token = tokens.signQueueToken({ fanId: `fan-${i}`, eventId: "finals" });
      const s = BigInt(`0x${Buffer.from(segments(token)[2], "base64url").subarray(32).toString("hex")}`);
      expect(s <= P256_ORDER >> 1n).toBe(true);
      const twin = otherForm(token);
      expect(await joseVerdict(twin, tokens.jwks())).toBe(`ok k queue fan-${i}`);
      expect(tokens.verifyQueueToken(twin, "finals")).toEqual({ ok: false, reason: "bad_signature" });
      twinsSeen++;
    }
    expect(twinsSeen).toBe(40);
  });
});

describe("rotation by kid", () => {
  it("an old key's tokens verify while it is verify-only and fail once it is removed; new tokens carry the new kid", async () => {
    const old = generateSigningKey("ES256", "2030-01");
    const next = generateSigningKey("EdDSA", "2030-02");
    const before = service([old]);
    const oldQueue = before.signQueueToken({ fanId: "alice", eventId: "finals" });
    const oldAccess = before.signAccessToken(access);

    // step 1: the new key is published first, verify-only; the old one still signs
    const published = service([old, verifyOnly(next)]);
    expect(published.jwks().keys.map((k) => k.kid)).toEqual(["2030-01", "2030-02"]);
    expect(headerOf(published.signQueueToken({ fanId: "bob", eventId: "finals" })).kid).toBe("2030-01");

    // step 2: the new key signs, the old one verifies what it signed
    const during = service([next, verifyOnly(old)]);
    expect(during.algorithm).toBe("EdDSA");
    expect(during.jwks().keys.map((k) => k.kid)).toEqual(["2030-02", "2030-01"]);
    const newQueue = during.signQueueToken({ fanId: "carol", eventId: "finals" });
    expect(headerOf(newQueue)).toEqual({ alg: "EdDSA", typ: "JWT", kid: "2030-02" });
    expect(during.verifyQueueToken(oldQueue, "finals")).toMatchObject({ ok: true, claims: { fanId: "alice" } });
    expect(during.verifyAccessToken(oldAccess, "finals")).toMatchObject({ ok: true, claims: { fanId: "alice" } });
    expect(during.verifyQueueToken(newQueue, "finals")).toMatchObject({ ok: true, claims: { fanId: "carol" } });
    expect(await joseVerdict(oldQueue, during.jwks())).toBe("ok 2030-01 queue alice");
    expect(await joseVerdict(newQueue, during.jwks())).toBe("ok 2030-02 queue carol");
    // a gateway still on the old set (a rolling deploy) knows the new kid from step 1
    expect(published.verifyQueueToken(newQueue, "finals")).toMatchObject({ ok: true });

    // step 3: the old key removed
    const after = service([next]);
    expect(after.jwks().keys.map((k) => k.kid)).toEqual(["2030-02"]);
    expect(after.verifyQueueToken(oldQueue, "finals")).toEqual({ ok: false, reason: "bad_signature" });
    expect(after.verifyAccessToken(oldAccess, "finals")).toEqual({ ok: false, reason: "bad_signature" });
    expect(after.verifyQueueToken(newQueue, "finals")).toMatchObject({ ok: true });
    expect(await joseVerdict(oldQueue, after.jwks())).toBe("ERR_JWKS_NO_MATCHING_KEY");
  });

  it("a verify-only key may be given by its public key alone", () => {
    const old = generateSigningKey("EdDSA", "old");
    const oldToken = service([old]).signQueueToken({ fanId: "alice", eventId: "finals" });
    const publicKeyPem = createPublicKey(old.privateKeyPem!).export({ format: "pem", type: "spki" }) as string;
    const rotated = service([
      generateSigningKey("EdDSA", "new"),
      { kid: "old", alg: "EdDSA", state: "verify-only", publicKeyPem },
    ]);
    expect(rotated.verifyQueueToken(oldToken, "finals")).toMatchObject({ ok: true });
  });
});

describe("HS256 and key sets apart", () => {
  it("an HS256 service publishes no key and refuses asymmetric tokens", () => {
    const hs = createTokenService({ secret: SECRET, now: () => NOW });
    expect(hs.algorithm).toBe("HS256");
    expect(hs.jwks()).toEqual({ keys: [] });
    for (const alg of ALGS) {
      const token = service([generateSigningKey(alg)]).signAccessToken(access);
      expect(hs.verifyAccessToken(token, "finals")).toEqual({ ok: false, reason: "malformed" });
    }
  });
});

describe("key sets refused", () => {
  const es = generateSigningKey("ES256", "es");
  const ed = generateSigningKey("EdDSA", "ed");
  const pem = (k: KeyObject) => k.export({ format: "pem", type: "pkcs8" }) as string;

  it.each([
    ["no key", [], /at least one key/],
    ["no active key", [verifyOnly(es)], /exactly one key must be active \(found 0\)/],
    ["two active keys", [es, ed], /exactly one key must be active \(found 2\)/],
    ["one kid twice", [es, { ...verifyOnly(ed), kid: "es" }], /two keys with one kid/],
    ["a kid JSON would escape", [{ ...es, kid: 'a"b' }], /kid/],
    [
      "an active key without its private key",
      [{ kid: "p", alg: "ES256", state: "active", publicKeyPem: "x" }],
      /needs privateKeyPem/,
    ],
    ["not PEM", [{ ...es, privateKeyPem: "hello" }], /not a private key in PEM/],
    [
      "ES256 on P-384",
      [{ ...es, privateKeyPem: pem(generateKeyPairSync("ec", { namedCurve: "P-384" }).privateKey) }],
      /ES256 needs a P-256 EC private key, not ec secp384r1/,
    ],
    [
      "EdDSA with an EC key",
      [{ ...ed, privateKeyPem: es.privateKeyPem }],
      /EdDSA needs an Ed25519 private key, not ec/,
    ],
    ["EdDSA on Ed448", [{ ...ed, privateKeyPem: pem(generateKeyPairSync("ed448").privateKey) }], /not ed448/],
    [
      "a public key that is not the private key's",
      [
        {
          ...es,
          publicKeyPem: createPublicKey(generateSigningKey("ES256").privateKeyPem!).export({
            format: "pem",
            type: "spki",
          }) as string,
        },
      ],
      /not privateKeyPem's/,
    ],
    ["an unknown member", [{ ...es, privateKeyFile: "/k.pem" }], /Unrecognized key/],
  ])("%s", (_name, keys, message) => {
    expect(() => loadSigningKeys(keys as SigningKeyInput[])).toThrow(message);
  });

  it("an active key of another algorithm than asked", () => {
    expect(() => loadSigningKeys([es], "EdDSA")).toThrow(/the active key es is ES256, not EdDSA/);
  });
});
