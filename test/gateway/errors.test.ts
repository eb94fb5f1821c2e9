/** Every error row of the contract that this part of the gateway can produce, with its status and code. */
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnLocalDynamoDB } from "../../src/local/dynamodb.js";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import {
  ADMIN_TOKEN,
  type AdmittedFan,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  putEvent,
  SECRET,
  startGateway,
  uniqueId,
} from "./harness.js";

let gw: Gateway;
let eventId: string;
let otherEventId: string;
let alice: AdmittedFan;
let bob: AdmittedFan;
let otherEventFan: AdmittedFan;

interface ErrorBody {
  error: { code: string; message: string; requestId: string; details?: Record<string, unknown> };
}

async function expectError(res: Response, status: number, code: string): Promise<ErrorBody> {
  const body = (await res.json()) as ErrorBody;
  expect({ status: res.status, code: body.error?.code }).toEqual({ status, code });
  expect(typeof body.error.message).toBe("string");
  expect(body.error.requestId).toBe(res.headers.get("x-request-id"));
  expect(JSON.stringify(body)).not.toMatch(/\bat .*\.(ts|js):\d+/);
  return body;
}

beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
  eventId = uniqueId();
  otherEventId = uniqueId();
  expect((await putEvent(gw, eventId, eventInput({ maxSeatsPerFan: 2 }))).status).toBe(201);
  expect((await putEvent(gw, otherEventId)).status).toBe(201);
  const fans = await admitFans(gw, eventId, ["alice", "bob"]);
  alice = fans[0]!;
  bob = fans[1]!;
  otherEventFan = (await admitFans(gw, otherEventId, ["carol"]))[0]!;
});
afterAll(async () => {
  await gw.close();
});

describe("400 invalid_request", () => {
  it("malformed JSON", async () => {
    const res = await gw.request(`/v1/events/${eventId}/queue`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    await expectError(res, 400, "invalid_request");
  });
  it("a schema violation names the field", async () => {
    const res = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: 42 } });
    const body = await expectError(res, 400, "invalid_request");
    expect(JSON.stringify(body.error.details)).toContain("fanId");
  });
  it("unknown fields, bad ids, a seat named twice", async () => {
    await expectError(
      await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "x", extra: 1 } }),
      400,
      "invalid_request",
    );
    await expectError(await gw.request("/v1/events/bad-id!/waiting-room"), 400, "invalid_request");
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: alice.accessToken,
        json: { seats: ["A-1-1", "A-1-1"] },
      }),
      400,
      "invalid_request",
    );
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: alice.accessToken,
        json: { seats: ["not a seat"] },
      }),
      400,
      "invalid_request",
    );
  });
});

describe("401 unauthenticated and 403 forbidden", () => {
  it("missing, malformed, forged and expired tokens are 401", async () => {
    const status = `/v1/events/${eventId}/queue/status`;
    await expectError(await gw.request(status), 401, "unauthenticated");
    await expectError(await gw.request(status, { token: "garbage" }), 401, "unauthenticated");
    const forged = await new SignJWT({ kind: "queue", evt: eventId })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("alice")
      .setIssuer("onsale-gateway")
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode("another-secret-that-is-long-enough-000000"));
    await expectError(await gw.request(status, { token: forged }), 401, "unauthenticated");
    const expired = await new SignJWT({ kind: "access", evt: eventId, sid: "s1" })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("alice")
      .setIssuer("onsale-gateway")
      .setIssuedAt(Math.floor(Date.now() / 1000) - 7200)
      .setExpirationTime(Math.floor(Date.now() / 1000) - 3600)
      .sign(new TextEncoder().encode(SECRET));
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds`, { method: "POST", token: expired, json: { seats: ["A-1-1"] } }),
      401,
      "unauthenticated",
    );
  });
  it("operator endpoints without or with a wrong token are 401", async () => {
    await expectError(await gw.request(`/v1/admin/events/${eventId}/stats`), 401, "unauthenticated");
    await expectError(
      await gw.request(`/v1/admin/events/${eventId}/stats`, { token: `${ADMIN_TOKEN}x` }),
      401,
      "unauthenticated",
    );
    await expectError(
      await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
        method: "PATCH",
        json: { paused: true },
        token: alice.accessToken,
      }),
      401,
      "unauthenticated",
    );
  });
  it("a token of the wrong kind or another event is 403", async () => {
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: alice.queueToken,
        json: { seats: ["A-1-1"] },
      }),
      403,
      "forbidden",
    );
    await expectError(
      await gw.request(`/v1/events/${eventId}/queue/status`, { token: alice.accessToken }),
      403,
      "forbidden",
    );
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: otherEventFan.accessToken,
        json: { seats: ["A-1-1"] },
      }),
      403,
      "forbidden",
    );
  });
  it("a revoked session cannot hold", async () => {
    const [dave] = await admitFans(gw, eventId, ["dave"]);
    const check = await gw.deps.waitingRoom.verifyAccessToken(dave!.accessToken, eventId);
    if (!check.ok) throw new Error("token should verify");
    expect((await gw.deps.waitingRoom.revokeSession(eventId, check.claims.sessionId)).ok).toBe(true);
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: dave!.accessToken,
        json: { seats: ["A-5-5"] },
      }),
      401,
      "unauthenticated",
    );
  });
});

describe("404 not_found", () => {
  it("unknown event, section, seat and hold; unknown route", async () => {
    await expectError(await gw.request(`/v1/events/${uniqueId()}/seatmap`), 404, "not_found");
    await expectError(await gw.request(`/v1/events/${uniqueId()}/waiting-room`), 404, "not_found");
    await expectError(
      await gw.request(`/v1/events/${uniqueId()}/queue`, { method: "POST", json: { fanId: "x" } }),
      404,
      "not_found",
    );
    await expectError(await gw.request(`/v1/events/${eventId}/sections/Q/seats`), 404, "not_found");
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: alice.accessToken,
        json: { seats: ["A-99-1"] },
      }),
      404,
      "not_found",
    );
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds/${"0".repeat(32)}`, { method: "DELETE", token: alice.accessToken }),
      404,
      "not_found",
    );
    await expectError(await gw.request("/v1/nope"), 404, "not_found");
  });
});

describe("409 conflicts", () => {
  it("seat_unavailable names the seats lost; hold_not_owned for another fan's hold", async () => {
    const won = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: alice.accessToken,
      json: { seats: ["B-1-1"] },
    });
    expect(won.status).toBe(201);
    const { holdId } = (await won.json()) as { holdId: string };
    const lost = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: bob.accessToken,
      json: { seats: ["B-1-1", "B-1-2"] },
    });
    const body = await expectError(lost, 409, "seat_unavailable");
    expect(body.error.details?.seats).toEqual(["B-1-1"]);
    await expectError(
      await gw.request(`/v1/events/${eventId}/holds/${holdId}`, { method: "DELETE", token: bob.accessToken }),
      409,
      "hold_not_owned",
    );
  });
});

describe("413, 422, 429", () => {
  it("a body over 16 KiB is 413 payload_too_large", async () => {
    const res = await gw.request(`/v1/events/${eventId}/queue`, {
      method: "POST",
      json: { fanId: "x".repeat(20_000) },
    });
    await expectError(res, 413, "payload_too_large");
  });
  it("more seats than maxSeatsPerFan is 422 seat_limit_exceeded", async () => {
    const res = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: alice.accessToken,
      json: { seats: ["A-2-1", "A-2-2", "A-2-3"] },
    });
    const body = await expectError(res, 422, "seat_limit_exceeded");
    expect(body.error.details).toEqual({ limit: 2 });
  });
  it("a fan over the per-fan limit is 429 rate_limited with Retry-After, while another fan is not slowed", async () => {
    const limited = await startGateway({ tableName: await createTable(), limits: { ratePerFan: 2 } });
    try {
      const ev = uniqueId();
      expect((await putEvent(limited, ev)).status).toBe(201);
      const [eve, frank] = await admitFans(limited, ev, ["eve", "frank"]);
      const polls = await Promise.all(
        Array.from({ length: 12 }, () => limited.request(`/v1/events/${ev}/queue/status`, { token: eve!.queueToken })),
      );
      const refused = polls.filter((r) => r.status === 429);
      expect(refused.length).toBeGreaterThan(0);
      expect(Number(refused[0]!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      await expectError(refused[0]!, 429, "rate_limited");
      expect((await limited.request(`/v1/events/${ev}/queue/status`, { token: frank!.queueToken })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe("503 unavailable", () => {
  it("claims answer 503 with Retry-After and change nothing while DynamoDB is down", async () => {
    const dynamo = await spawnLocalDynamoDB({ port: 0 });
    const tableName = "down_test";
    const client = createDynamoClient({ endpoint: dynamo.endpoint, region: "us-east-1" });
    await ensureTable(client, tableName);
    client.destroy();
    const local = await startGateway({ tableName, dynamoEndpoint: dynamo.endpoint });
    try {
      const ev = uniqueId();
      expect((await putEvent(local, ev)).status).toBe(201);
      const [gina] = await admitFans(local, ev, ["gina"]);
      // Warm the event cache, then take DynamoDB away.
      expect((await local.request(`/v1/events/${ev}/seatmap`)).status).toBe(200);
      await dynamo.close();
      const res = await local.request(`/v1/events/${ev}/holds`, {
        method: "POST",
        token: gina!.accessToken,
        json: { seats: ["A-1-1"] },
      });
      await expectError(res, 503, "unavailable");
      expect(res.headers.get("retry-after")).toBe("1");
      // The shield's lease was released: nothing is left claiming the seat in Redis either.
      const shield = await local.deps.seatMap.shield(ev, ["A-1-1"], 1_000);
      expect(shield.kind).toBe("leased");
    } finally {
      await local.close();
      await dynamo.close();
    }
  });
});
