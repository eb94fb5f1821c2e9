/**
 * The payment provider goes away for a moment, as a user meets it: the simulated provider keeps
 * its ledger in a redis-server of its own (PAYMENT_REDIS_URL), which this file stops and starts
 * again (its data saved to disk first, as a real provider keeps its ledger). The gateway runs with
 * its BullMQ workers over real Redis and the local DynamoDB; the audit checks the money at the end.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { signWebhookEvent, WEBHOOK_SIGNATURE_HEADER } from "../../src/payments/webhook.js";
import { derivedWebhookSecret } from "../../src/gateway.js";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { createSimulatedProvider } from "../../src/payments/simulated.js";
import { purchaseIdOf } from "../../src/purchases/saga.js";
import {
  type AdmittedFan,
  admitFans,
  createTable,
  expectAuditPasses,
  type Gateway,
  putEvent,
  SECRET,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { type ClaimedDatabase, claimRedisDatabase, pollUntil } from "../support/worker-process.js";

let gw: Gateway;
let db: ClaimedDatabase;
let ledgerDir: string;
let ledgerPort: number;
let ledgerServer: SpawnedRedis;
let ledgerClient: Redis;
const PAYMENT_TIMEOUT_MS = 1_500;

const startLedger = (port?: number) =>
  spawnRedis({ ...(port ? { port } : {}), extraArgs: ["--dir", ledgerDir, "--dbfilename", "ledger.rdb"] });

let ledgerDown = false;

async function stopLedger() {
  ledgerDown = true;
  // A provider's ledger is durable: save it, then take the server away for real.
  await ledgerClient.save();
  const exited = new Promise((resolve) => ledgerServer.child.once("exit", resolve));
  ledgerServer.child.kill("SIGKILL");
  await exited;
}

async function restartLedger() {
  if (!ledgerDown) return;
  ledgerServer = await startLedger(ledgerPort);
  ledgerDown = false;
}

beforeAll(async () => {
  db = await claimRedisDatabase();
  ledgerDir = mkdtempSync(join(tmpdir(), "ledger-"));
  ledgerServer = await startLedger();
  ledgerPort = ledgerServer.port;
  ledgerClient = new Redis(ledgerServer.url, { maxRetriesPerRequest: 1 });
  ledgerClient.on("error", () => {});
  gw = await startGateway({
    tableName: await createTable(),
    redisUrl: db.url,
    paymentRedisUrl: ledgerServer.url,
    paymentTimeoutMs: PAYMENT_TIMEOUT_MS,
    workers: true,
  });
});
afterEach(restartLedger);
afterAll(async () => {
  await gw?.close();
  ledgerClient?.disconnect();
  await ledgerServer?.close();
  await db?.release();
  if (ledgerDir) rmSync(ledgerDir, { recursive: true, force: true });
});

async function holdSeat(fan: AdmittedFan, eventId: string, seat: string) {
  const res = await gw.request(`/v1/events/${eventId}/holds`, {
    method: "POST",
    token: fan.accessToken,
    json: { seats: [seat] },
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { holdId: string }).holdId;
}

function buy(fan: AdmittedFan, eventId: string, holdId: string, key: string, paymentToken: string) {
  return gw.request(`/v1/events/${eventId}/holds/${holdId}/purchase`, {
    method: "POST",
    token: fan.accessToken,
    headers: { "idempotency-key": key },
    json: { paymentToken },
  });
}

async function statusOf(fan: AdmittedFan, purchaseId: string): Promise<string> {
  const res = await gw.request(`/v1/purchases/${purchaseId}`, { token: fan.accessToken });
  return ((await res.json()) as { status: string }).status;
}

describe("the payment provider blips (its ledger's redis-server stopped and restarted)", () => {
  it("a replay while the provider is down answers 202, never 'nothing charged', and the charge ends in a ticket", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["blip-fan"]);
    const holdId = await holdSeat(fan!, eventId, "A-1-1");

    // The charge goes through but answers after the payment timeout: 202.
    const first = await buy(fan!, eventId, holdId, "blip-key", "tok_timeout");
    expect(first.status).toBe(202);
    const purchaseId = purchaseIdOf(eventId, "blip-fan", "blip-key");

    await stopLedger();
    // The provider's webhook arrives while its lookup cannot answer: 503 with Retry-After, so the provider retries.
    const { body: hook, signature } = signWebhookEvent(derivedWebhookSecret(SECRET), {
      id: `evt_${uniqueId()}`,
      type: "charge.succeeded",
      data: { idempotencyKey: purchaseId },
    });
    const delivered = await gw.request("/v1/payments/webhook", {
      method: "POST",
      headers: { "content-type": "application/json", [WEBHOOK_SIGNATURE_HEADER]: signature },
      body: hook,
    });
    expect(delivered.status).toBe(503);
    expect(delivered.headers.get("retry-after")).not.toBeNull();
    expect(((await delivered.json()) as { error: { code: string } }).error.code).toBe("unavailable");

    const replay = await buy(fan!, eventId, holdId, "blip-key", "tok_timeout");
    const body = (await replay.json()) as { status?: string; error?: { message: string } };
    expect(replay.status, JSON.stringify(body)).toBe(202);
    expect(body.status).toBe("pending");
    expect(await statusOf(fan!, purchaseId)).toBe("pending");

    await restartLedger();
    await pollUntil(
      "the purchase confirmed",
      () => statusOf(fan!, purchaseId),
      (s) => s === "confirmed",
      {
        timeoutMs: 60_000,
      },
    );
    await expectAuditPasses(gw, eventId, ledgerClient);
    expect(
      (await createSimulatedProvider({ redis: ledgerClient }).listCharges()).filter(
        (c) => c.idempotencyKey === purchaseId,
      ),
    ).toHaveLength(1);
  });

  it("a 5xx after the capture (tok_error_after_charge) is looked up and confirmed: 201", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["fivexx-fan"]);
    const holdId = await holdSeat(fan!, eventId, "A-2-2");
    const res = await buy(fan!, eventId, holdId, "5xx-key", "tok_error_after_charge");
    expect(res.status, await res.clone().text()).toBe(201);
    expect(((await res.json()) as { status: string }).status).toBe("confirmed");
    await expectAuditPasses(gw, eventId, ledgerClient);
  });
});
