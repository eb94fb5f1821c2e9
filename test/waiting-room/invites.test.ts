/** Invite tokens (src/waiting-room/invites.ts): HS256 and EdDSA, as an operator mints them. */
import { createHmac, generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  createInviteVerifier,
  loadInvitePublicKey,
  MAX_INVITE_LIFETIME_SECONDS,
  mintInvite,
} from "../../src/waiting-room/invites.js";

const SECRET = "operator-invite-secret-0123456789-abcdef";
const NOW = 1_800_000_000_000;
const exp = NOW / 1000 + 600;
const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
const text = (v: string) => Buffer.from(v).toString("base64url");
/** Signs any header and payload text with HS256, as a careless or hostile minter might. */
const signHs256 = (header: string, payload: string) => {
  const body = `${header}.${payload}`;
  return `${body}.${createHmac("sha256", SECRET).update(body).digest("base64url")}`;
};

describe("invite tokens", () => {
  it("checks an HS256 invite: event, identity, expiry", () => {
    const verifier = createInviteVerifier({ secret: SECRET });
    const token = mintInvite({ eventId: "evt1", identity: "user-7", exp }, { secret: SECRET });
    expect(verifier.verify(token, "evt1", NOW)).toEqual({
      ok: true,
      claims: { eventId: "evt1", identity: "user-7", exp },
    });
    expect(verifier.verify(token, "evt2", NOW)).toEqual({ ok: false, reason: "wrong_event" });
    expect(verifier.verify(token, "evt1", exp * 1000)).toEqual({ ok: false, reason: "expired" });
    const other = mintInvite({ eventId: "evt1", identity: "user-7", exp }, { secret: `${SECRET}x` });
    expect(verifier.verify(other, "evt1", NOW)).toEqual({ ok: false, reason: "bad_signature" });
  });

  it("matches what any JWT library signs (the documented format)", () => {
    const body = `${part({ typ: "JWT", alg: "HS256" })}.${part({ sub: "u1", evt: "evt1", exp, iat: exp - 60 })}`;
    const token = `${body}.${createHmac("sha256", SECRET).update(body).digest("base64url")}`;
    expect(createInviteVerifier({ secret: SECRET }).verify(token, "evt1", NOW).ok).toBe(true);
  });

  it("checks an EdDSA invite with a PEM or JWK public key", () => {
    const { publicKey, privateKey } = generateKeyPairSync("ed25519");
    const token = mintInvite({ eventId: "evt1", identity: "user-8", exp }, { privateKey });
    const pem = publicKey.export({ type: "spki", format: "pem" }).toString();
    const jwk = JSON.stringify(publicKey.export({ format: "jwk" }));
    for (const key of [pem, jwk]) {
      expect(createInviteVerifier({ publicKey: key }).verify(token, "evt1", NOW).ok).toBe(true);
    }
    const stranger = generateKeyPairSync("ed25519").privateKey;
    const forged = mintInvite({ eventId: "evt1", identity: "user-8", exp }, { privateKey: stranger });
    expect(createInviteVerifier({ publicKey: pem }).verify(forged, "evt1", NOW)).toEqual({
      ok: false,
      reason: "bad_signature",
    });
    // an EdDSA invite with only a secret configured has no key to check it
    expect(createInviteVerifier({ secret: SECRET }).verify(token, "evt1", NOW)).toEqual({
      ok: false,
      reason: "no_key",
    });
  });

  it("refuses alg none, tampered payloads and garbage", () => {
    const verifier = createInviteVerifier({ secret: SECRET });
    const none = `${part({ alg: "none" })}.${part({ evt: "evt1", sub: "u", exp })}.`;
    expect(verifier.verify(none, "evt1", NOW)).toEqual({ ok: false, reason: "unsupported_alg" });
    const token = mintInvite({ eventId: "evt1", identity: "user-7", exp }, { secret: SECRET });
    const [h, , s] = token.split(".");
    const swapped = `${h}.${part({ evt: "evt1", sub: "someone-else", exp })}.${s}`;
    expect(verifier.verify(swapped, "evt1", NOW)).toEqual({ ok: false, reason: "bad_signature" });
    for (const garbage of ["", "a.b", "a.b.c", "x".repeat(5_000)])
      expect(verifier.verify(garbage, "evt1", NOW).ok).toBe(false);
  });

  it("refuses a signature that is not the canonical base64url of its alg's length", () => {
    const verifier = createInviteVerifier({ secret: SECRET });
    const token = mintInvite({ eventId: "evt1", identity: "user-7", exp }, { secret: SECRET });
    expect(verifier.verify(token, "evt1", NOW).ok).toBe(true);
    const [h, p, s = ""] = token.split(".");
    // Each of these decodes (leniently) to the same 32 bytes as the real signature.
    const last = s.at(-1) ?? "";
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const sibling = alphabet[alphabet.indexOf(last) ^ 1] ?? "";
    for (const junk of [
      `${s}!!`,
      `${s.slice(0, 10)}*${s.slice(10)}`,
      `${s}=`,
      `${s} `,
      `${s.slice(0, -1)}${sibling}`,
    ]) {
      expect(Buffer.from(junk, "base64url").equals(Buffer.from(s, "base64url"))).toBe(true);
      expect(verifier.verify(`${h}.${p}.${junk}`, "evt1", NOW), junk).toEqual({ ok: false, reason: "malformed" });
    }
    // Too short or too long for HS256 (32 bytes), and for EdDSA (64 bytes).
    expect(verifier.verify(`${h}.${p}.${s.slice(0, -4)}`, "evt1", NOW)).toEqual({ ok: false, reason: "malformed" });
    expect(verifier.verify(`${h}.${p}.${s}AAAA`, "evt1", NOW)).toEqual({ ok: false, reason: "malformed" });
    const { publicKey, privateKey } = generateKeyPairSync("ed25519");
    const pem = publicKey.export({ type: "spki", format: "pem" }).toString();
    const ed = mintInvite({ eventId: "evt1", identity: "user-8", exp }, { privateKey });
    const [eh, ep, es = ""] = ed.split(".");
    const edVerifier = createInviteVerifier({ publicKey: pem });
    expect(edVerifier.verify(ed, "evt1", NOW).ok).toBe(true);
    for (const junk of [`${es}!`, `${es}==`, `${es.slice(0, 5)}.${es.slice(5)}`, `${es}AA`])
      expect(edVerifier.verify(`${eh}.${ep}.${junk}`, "evt1", NOW).ok, junk).toBe(false);
    // Junk in the header or the payload part is refused too, before any key is used.
    expect(verifier.verify(`${h}!.${p}.${s}`, "evt1", NOW)).toEqual({ ok: false, reason: "malformed" });
    expect(verifier.verify(`${h}.${p}=.${s}`, "evt1", NOW)).toEqual({ ok: false, reason: "malformed" });
  });

  it("refuses a crit header: the gateway understands no JWS extension (RFC 7515 4.1.11)", () => {
    const verifier = createInviteVerifier({ secret: SECRET });
    const payload = part({ evt: "evt1", sub: "u1", exp });
    for (const crit of [["exp"], ["b64"], [], "exp"]) {
      const token = signHs256(part({ alg: "HS256", typ: "JWT", crit, b64: true, exp: 1 }), payload);
      expect(verifier.verify(token, "evt1", NOW), JSON.stringify(crit)).toEqual({
        ok: false,
        reason: "unsupported_header",
      });
    }
    // Without it the same claims check.
    expect(verifier.verify(signHs256(part({ alg: "HS256", typ: "JWT" }), payload), "evt1", NOW).ok).toBe(true);
  });

  it("refuses an exp that is not a whole NumericDate within the longest lifetime", () => {
    const verifier = createInviteVerifier({ secret: SECRET });
    const header = part({ alg: "HS256", typ: "JWT" });
    const nowSeconds = NOW / 1000;
    const withExp = (e: string) => signHs256(header, text(`{"evt":"evt1","sub":"u1","exp":${e}}`));
    for (const e of ["1e300", "1.5e9", `${nowSeconds + 600.5}`, "9007199254740993", `"${exp}"`, "null", "-1"]) {
      expect(verifier.verify(withExp(e), "evt1", NOW).ok, e).toBe(false);
    }
    expect(verifier.verify(withExp("1e300"), "evt1", NOW)).toEqual({ ok: false, reason: "malformed" });
    // A whole number past the longest lifetime is refused; one at it checks.
    expect(verifier.verify(withExp(`${nowSeconds + MAX_INVITE_LIFETIME_SECONDS + 1}`), "evt1", NOW)).toEqual({
      ok: false,
      reason: "exp_too_far",
    });
    expect(verifier.verify(withExp(`${nowSeconds + MAX_INVITE_LIFETIME_SECONDS}`), "evt1", NOW).ok).toBe(true);
    expect(verifier.verify(withExp(`${nowSeconds + 600}`), "evt1", NOW).ok).toBe(true);
  });

  it("refuses a header or payload that names a member twice (which one counts depends on the parser)", () => {
    const verifier = createInviteVerifier({ secret: SECRET });
    const payload = part({ evt: "evt1", sub: "u1", exp });
    const twoAlgs = signHs256(text('{"alg":"none","alg":"HS256","typ":"JWT"}'), payload);
    expect(verifier.verify(twoAlgs, "evt1", NOW)).toEqual({ ok: false, reason: "malformed" });
    const escaped = signHs256(text('{"alg":"HS256","\\u0061lg":"HS256"}'), payload);
    expect(verifier.verify(escaped, "evt1", NOW)).toEqual({ ok: false, reason: "malformed" });
    const twoSubs = signHs256(part({ alg: "HS256" }), text(`{"evt":"evt1","sub":"u1","sub":"u2","exp":${exp}}`));
    expect(verifier.verify(twoSubs, "evt1", NOW)).toEqual({ ok: false, reason: "malformed" });
    // The same name in a nested object, or inside a string, is no duplicate of the header's.
    const nested = signHs256(text('{"alg":"HS256","x":{"alg":"a"},"y":"\\"alg\\":","z":["alg","alg"]}'), payload);
    expect(verifier.verify(nested, "evt1", NOW).ok).toBe(true);
    // Unknown algs stay refused, whatever their case.
    for (const alg of ["hs256", "HS512", "RS256", "ES256", "EDDSA", "none", null, ["HS256"]]) {
      expect(verifier.verify(signHs256(part({ alg }), payload), "evt1", NOW), String(alg)).toEqual({
        ok: false,
        reason: "unsupported_alg",
      });
    }
  });

  it("refuses a public key that is not Ed25519", () => {
    const rsa = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" });
    expect(() => loadInvitePublicKey(rsa.toString())).toThrow(/Ed25519/);
  });
});
