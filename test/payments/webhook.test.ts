import { describe, expect, it } from "vitest";
import {
  readWebhook,
  signWebhook,
  signWebhookEvent,
  verifyWebhook,
  type WebhookEvent,
} from "../../src/payments/webhook.js";

// Pure functions: no I/O. The known-answer vector was computed outside Node:
//   printf '%s' "1700000000.$BODY" | openssl dgst -sha256 -hmac whsec_test_secret
const secret = "whsec_test_secret";
const body = '{"id":"evt_1","type":"charge.succeeded","data":{"idempotencyKey":"k1","chargeId":"ch_1","amount":1500}}';
const t = 1_700_000_000;
const knownMac = "7d234f8b70b72441480ab01a08eff45f35fda7838d904191301bd954e44f1a0d";

describe("webhook signatures (HMAC-SHA256, t=<unix>,v1=<hex>)", () => {
  it("signs Stripe-style over `<t>.<raw body>` (known answer)", () => {
    expect(signWebhook(secret, body, t)).toBe(`t=${t},v1=${knownMac}`);
    expect(signWebhook(secret, Buffer.from(body), t)).toBe(`t=${t},v1=${knownMac}`);
  });

  it("accepts a genuine signature inside the tolerance, either side of now", () => {
    const header = signWebhook(secret, body, t);
    expect(verifyWebhook(secret, body, header, 300, t)).toEqual({ ok: true, timestamp: t });
    expect(verifyWebhook(secret, Buffer.from(body), header, 300, t + 300)).toEqual({ ok: true, timestamp: t });
    expect(verifyWebhook(secret, body, header, 300, t - 300)).toEqual({ ok: true, timestamp: t });
  });

  it("rejects a tampered body", () => {
    const header = signWebhook(secret, body, t);
    const tampered = body.replace("1500", "1");
    expect(verifyWebhook(secret, tampered, header, 300, t)).toEqual({ ok: false, reason: "bad_signature" });
    expect(verifyWebhook(secret, `${body} `, header, 300, t)).toEqual({ ok: false, reason: "bad_signature" });
  });

  it("rejects a signature made with another secret", () => {
    const header = signWebhook("whsec_someone_else", body, t);
    expect(verifyWebhook(secret, body, header, 300, t)).toEqual({ ok: false, reason: "bad_signature" });
    expect(verifyWebhook("", body, signWebhook(secret, body, t), 300, t)).toEqual({
      ok: false,
      reason: "bad_signature",
    });
  });

  it("rejects a re-dated header: the timestamp is inside the MAC", () => {
    const mac = signWebhook(secret, body, t).split("v1=")[1];
    expect(verifyWebhook(secret, body, `t=${t + 1000},v1=${mac}`, 300, t + 1000)).toEqual({
      ok: false,
      reason: "bad_signature",
    });
  });

  it("rejects a genuine but stale (or far-future) timestamp", () => {
    const header = signWebhook(secret, body, t);
    expect(verifyWebhook(secret, body, header, 300, t + 301)).toEqual({ ok: false, reason: "stale_timestamp" });
    expect(verifyWebhook(secret, body, header, 300, t - 301)).toEqual({ ok: false, reason: "stale_timestamp" });
  });

  it("rejects malformed headers", () => {
    const mac = knownMac;
    const malformed = [
      undefined,
      null,
      "",
      "garbage",
      `v1=${mac}`,
      `t=${t}`,
      `t=abc,v1=${mac}`,
      `t=-5,v1=${mac}`,
      `t=${t},v1=${mac.slice(0, 63)}`,
      `t=${t},v1=${mac.slice(0, 62)}zz`,
      `t=${t},t=${t},v1=${mac}`,
      `t=${t},v0=${mac}`,
      `t=${t},v1=${mac},${"x".repeat(2000)}`,
    ];
    for (const header of malformed) {
      expect(verifyWebhook(secret, body, header, 300, t), String(header)).toEqual({
        ok: false,
        reason: "malformed_header",
      });
    }
  });

  it("accepts any matching v1 and any listed secret, for secret rotation", () => {
    const oldMac = signWebhook("whsec_old", body, t).split("v1=")[1];
    const newMac = signWebhook(secret, body, t).split("v1=")[1];
    const header = ` t=${t} , v1=${oldMac}, v1=${newMac}`;
    expect(verifyWebhook(secret, body, header, 300, t).ok).toBe(true);
    expect(verifyWebhook("whsec_old", body, header, 300, t).ok).toBe(true);
    expect(verifyWebhook(["whsec_other", secret], body, signWebhook(secret, body, t), 300, t).ok).toBe(true);
    expect(verifyWebhook(["whsec_other"], body, header, 300, t).ok).toBe(false);
  });

  it("refuses to sign with an empty secret or a fractional timestamp", () => {
    expect(() => signWebhook("", body, t)).toThrow(RangeError);
    expect(() => signWebhook(secret, body, 1.5)).toThrow(RangeError);
  });
});

describe("webhook bodies", () => {
  const event: WebhookEvent = {
    id: "evt_abc",
    type: "charge.refunded",
    data: { idempotencyKey: "purchase-1", chargeId: "ch_x", amount: 6000 },
  };

  it("reads a signed event back: verified and parsed against the schema", () => {
    const { body: raw, signature } = signWebhookEvent(secret, event, t);
    expect(readWebhook(secret, raw, signature, 300, t)).toEqual({ ok: true, event, timestamp: t });
  });

  it("reports signature failures before looking at the body", () => {
    const { body: raw, signature } = signWebhookEvent(secret, event, t);
    expect(readWebhook("whsec_wrong", raw, signature, 300, t)).toEqual({ ok: false, reason: "bad_signature" });
    expect(readWebhook(secret, raw, "nope", 300, t)).toEqual({ ok: false, reason: "malformed_header" });
  });

  it("rejects a genuinely signed body that is not JSON or not an event", () => {
    for (const raw of ["not json", '{"id":"e","type":"charge.weird","data":{"idempotencyKey":"k"}}', '{"id":"e"}']) {
      expect(readWebhook(secret, raw, signWebhook(secret, raw, t), 300, t)).toEqual({
        ok: false,
        reason: "invalid_body",
      });
    }
  });
});
