/** Invite tokens (src/waiting-room/invites.ts): HS256 and EdDSA, as an operator mints them. */
import { createHmac, generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createInviteVerifier, loadInvitePublicKey, mintInvite } from "../../src/waiting-room/invites.js";

const SECRET = "operator-invite-secret-0123456789-abcdef";
const NOW = 1_800_000_000_000;
const exp = NOW / 1000 + 600;

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
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
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
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const none = `${part({ alg: "none" })}.${part({ evt: "evt1", sub: "u", exp })}.`;
    expect(verifier.verify(none, "evt1", NOW)).toEqual({ ok: false, reason: "unsupported_alg" });
    const token = mintInvite({ eventId: "evt1", identity: "user-7", exp }, { secret: SECRET });
    const [h, , s] = token.split(".");
    const swapped = `${h}.${part({ evt: "evt1", sub: "someone-else", exp })}.${s}`;
    expect(verifier.verify(swapped, "evt1", NOW)).toEqual({ ok: false, reason: "bad_signature" });
    for (const garbage of ["", "a.b", "a.b.c", "x".repeat(5_000)])
      expect(verifier.verify(garbage, "evt1", NOW).ok).toBe(false);
  });

  it("refuses a public key that is not Ed25519", () => {
    const rsa = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" });
    expect(() => loadInvitePublicKey(rsa.toString())).toThrow(/Ed25519/);
  });
});
