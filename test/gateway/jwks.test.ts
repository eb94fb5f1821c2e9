/**
 * Tokens others can verify, end to end: gateways signing ES256 and EdDSA (TOKEN_SIGNING_KEYS) on a
 * real port, real Redis and DynamoDB; jose's `jwtVerify` with `createRemoteJWKSet` against the
 * running gateway's /.well-known/jwks.json checks the queue and access tokens a fan got over HTTP.
 * A rotation across two gateways (the second with the new key active and the old verify-only)
 * takes the first's tokens, and a third without the old key refuses them. HS256 publishes none.
 */
import { createRemoteJWKSet, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildApp } from "../../src/http/app.js";
import { buildServices } from "../../src/services.js";
import { generateSigningKey, type SigningKeyInput, TOKEN_ISSUER } from "../../src/waiting-room/index.js";
import {
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  gatewayOf,
  listen,
  putEvent,
  startGateway,
  testServicesConfig,
  uniqueId,
} from "./harness.js";

interface Served {
  gw: Gateway;
  url: string;
  close(): Promise<void>;
}

async function serveWithKeys(tableName: string, keys: readonly SigningKeyInput[] | undefined): Promise<Served> {
  const services = buildServices({
    ...testServicesConfig({ tableName, redisUrl: inject("redisUrl") }),
    // as startGateway builds it: the offline queue, so a call made while connecting waits for it
    redisOptions: { maxRetriesPerRequest: 1, enableAutoPipelining: true },
    ...(keys ? { tokenSigningKeys: keys } : {}),
  });
  const gw = gatewayOf(buildApp(services), services);
  const server = await listen(gw);
  return {
    gw,
    url: server.url,
    close: async () => {
      await server.close();
      await gw.close();
    },
  };
}

let tableName: string;
const open: Served[] = [];
beforeAll(async () => {
  tableName = await createTable();
});
afterAll(async () => {
  await Promise.all(open.map((s) => s.close()));
});

async function serve(keys: readonly SigningKeyInput[] | undefined): Promise<Served> {
  const s = await serveWithKeys(tableName, keys);
  open.push(s);
  return s;
}

const verifyOnly = (key: SigningKeyInput): SigningKeyInput => ({ ...key, state: "verify-only" });

describe.each(["ES256", "EdDSA"] as const)("a gateway signing %s", (alg) => {
  it("publishes its key, and jose verifies a fan's queue and access tokens from the JWKS URL alone", async () => {
    const key = generateSigningKey(alg);
    const { gw, url } = await serve([key]);
    const eventId = uniqueId("jw");
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["fan-1"]);

    const res = await fetch(`${url}/.well-known/jwks.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    expect(res.headers.get("content-type")).toContain("application/json");
    const body = (await res.json()) as { keys: Record<string, string>[] };
    expect(body.keys).toHaveLength(1);
    expect(body.keys[0]).toMatchObject({ kid: key.kid, alg, use: "sig" });
    expect(Object.keys(body.keys[0]!)).not.toContain("d");
    const etag = res.headers.get("etag")!;
    const again = await fetch(`${url}/.well-known/jwks.json`, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);

    const jwks = createRemoteJWKSet(new URL(`${url}/.well-known/jwks.json`));
    const options = { issuer: TOKEN_ISSUER, algorithms: [alg] };
    const queue = await jwtVerify(fan!.queueToken, jwks, options);
    expect(queue.protectedHeader).toEqual({ alg, typ: "JWT", kid: key.kid });
    expect(queue.payload).toMatchObject({ kind: "queue", sub: "fan-1", evt: eventId });
    const access = await jwtVerify(fan!.accessToken, jwks, options);
    expect(access.payload).toMatchObject({ kind: "access", sub: "fan-1", evt: eventId });
    expect(typeof access.payload.sid).toBe("string");

    // and the gateway takes its own access token on a claim
    const hold = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      json: { seats: ["A-1-1"] },
      token: fan!.accessToken,
    });
    expect(hold.status).toBe(201);
  });
});

describe("rotation across gateways", () => {
  it("the new gateway takes the old key's tokens while it is verify-only, the JWKS lists both, and once removed they are refused", async () => {
    const old = generateSigningKey("ES256", uniqueId("old"));
    const next = generateSigningKey("EdDSA", uniqueId("new"));
    const before = await serve([old]);
    const eventId = uniqueId("jr");
    expect((await putEvent(before.gw, eventId, eventInput())).status).toBe(201);
    const [early] = await admitFans(before.gw, eventId, ["early"]);

    const during = await serve([next, verifyOnly(old)]);
    const listed = (await (await fetch(`${during.url}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    expect(listed.keys.map((k) => k.kid)).toEqual([next.kid, old.kid]);
    // the old key's tokens: the status poll and a claim on the new gateway, and jose on its JWKS
    const polled = await during.gw.request(`/v1/events/${eventId}/queue/status`, { token: early!.queueToken });
    expect(polled.status).toBe(200);
    const jwks = createRemoteJWKSet(new URL(`${during.url}/.well-known/jwks.json`));
    expect((await jwtVerify(early!.accessToken, jwks, { issuer: TOKEN_ISSUER })).protectedHeader.kid).toBe(old.kid);
    const hold = await during.gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      json: { seats: ["A-1-2"] },
      token: early!.accessToken,
    });
    expect(hold.status).toBe(201);
    // new tokens carry the new kid
    const [late] = await admitFans(during.gw, eventId, ["late"]);
    for (const token of [late!.queueToken, late!.accessToken]) {
      expect((await jwtVerify(token, jwks, { issuer: TOKEN_ISSUER })).protectedHeader).toEqual({
        alg: "EdDSA",
        typ: "JWT",
        kid: next.kid,
      });
    }

    const after = await serve([next]);
    const refused = await after.gw.request(`/v1/events/${eventId}/queue/status`, { token: early!.queueToken });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("unauthenticated");
    const claim = await after.gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      json: { seats: ["A-1-3"] },
      token: early!.accessToken,
    });
    expect(claim.status).toBe(401);
    expect((await after.gw.request(`/v1/events/${eventId}/queue/status`, { token: late!.queueToken })).status).toBe(
      200,
    );
  });
});

describe("an HS256 gateway (the default)", () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ tableName });
  });
  afterAll(() => gw.close());

  it("publishes an empty key set, and its tokens carry no kid", async () => {
    const res = await gw.request("/.well-known/jwks.json");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ keys: [] });
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    const eventId = uniqueId("jh");
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const joined = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "h" } });
    const { queueToken } = (await joined.json()) as { queueToken: string };
    expect(JSON.parse(Buffer.from(queueToken.split(".")[0]!, "base64url").toString())).toEqual({
      alg: "HS256",
      typ: "JWT",
    });
  });
});
