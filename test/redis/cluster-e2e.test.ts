/**
 * The gateway and a worker, as real processes (src/main.ts --role=gateway x2, --role=worker), on
 * a Redis Cluster of 3 masters with one replica each (cluster-node-timeout 1 s), started here:
 * REDIS_CLUSTER_NODES and nothing else tells them. Each scenario's event lives on a different
 * master, and the kill scenario's event shares its master with the BullMQ queues (`{onsale}`), so
 * a killed master takes a waiting room, a seat map, the shield, the pub/sub shard and every queue
 * at once.
 *
 *  - the fan journey over HTTP: join, admitted, seat map, hold, purchase; the seat changes reach a
 *    stream opened on the other gateway (sharded pub/sub);
 *  - a small sale (40 seats, 60 fans at once): the audit passes, every confirmed purchase's
 *    booking is delivered through the cluster's BullMQ and acknowledged;
 *  - a master SIGKILLed during a sale: its replica takes over, the gateways serve again, nothing
 *    is oversold, the audit passes, the bookings are delivered, and what fans saw meanwhile was a
 *    503 with a code and Retry-After, never another 5xx.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Cluster } from "ioredis";
import type { Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { auditEvent } from "../../src/audit/audit.js";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createInventory, type Inventory } from "../../src/inventory/index.js";
import { createLogger } from "../../src/logger.js";
import { createSimulatedProvider } from "../../src/payments/simulated.js";
import { REFUND_DUE } from "../../src/purchases/saga.js";
import { connectRedis } from "../../src/redis/connect.js";
import { seatMapKeys } from "../../src/seatmap/cache.js";
import { superviseBookings } from "../../src/workers/bookings-consumer.js";
import { bookingJobId, createBookingsQueue, QUEUE_PREFIX } from "../../src/workers/queues.js";
import {
  admitFans,
  type Fan,
  type PurchaseAttempt,
  type PurchaseEnd,
  seatIds,
  startSale,
} from "../chaos/support/fans.js";
import { Traffic } from "../chaos/support/traffic.js";
import { ADMIN_TOKEN, eventInput, SECRET, uniqueId } from "../gateway/harness.js";
import { type MainProcess, startMainProcess } from "../support/processes.js";
import {
  clusterClient,
  idsOnMasters,
  killNode,
  nodeAt,
  ownerOf,
  type SpawnedRedisCluster,
  spawnRedisCluster,
  waitForFailover,
} from "../support/redis-cluster.js";

const logger = createLogger({ level: "silent" });
let cluster: SpawnedRedisCluster;
let client: Cluster;
let dataDir = "";
let tableName = "";
let inventory: Inventory;
let dynamo: ReturnType<typeof createDynamoClient>;
const gateways: MainProcess[] = [];
let worker: MainProcess | undefined;
let traffic: Traffic;
/** [journey, sale, kill]: three masters; the kill event's master also serves the queues. */
let events: string[] = [];
/** Purchase ids whose booking a consumer here handled (at least once), by event. */
const delivered = new Map<string, Set<string>>();
let stopConsumer: (() => Promise<void>) | undefined;
let consumerState: () => string = () => "not started";

const roomKey = (eventId: string) => seatMapKeys.availability(eventId);

beforeAll(async () => {
  cluster = await spawnRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1_000 });
  client = await clusterClient(cluster);
  dataDir = await mkdtemp(join(tmpdir(), "cluster-e2e-"));
  tableName = `cl_${uniqueId("t")}`;
  dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1", maxAttempts: 3 });
  await ensureTable(dynamo, tableName);
  inventory = createInventory({ client: dynamo, tableName, eventCacheMs: 0 });

  const queues = await ownerOf(client, `${QUEUE_PREFIX}:x`);
  const [kill] = await idsOnMasters(client, { count: 1, make: () => uniqueId("k"), keyOf: roomKey, on: queues });
  const others = await idsOnMasters(client, { count: 2, make: () => uniqueId("c"), keyOf: roomKey, avoid: [queues] });
  events = [...others, kill!];

  const env: Record<string, string> = {
    REDIS_CLUSTER_NODES: cluster.nodeList,
    DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
    DYNAMODB_TABLE: tableName,
    DYNAMODB_TIMEOUT_MS: "2000",
    DYNAMODB_MAX_ATTEMPTS: "2",
    ADMIN_TOKEN,
    GATEWAY_SECRET: SECRET,
    DATA_DIR: dataDir,
    DEMO_EVENT: "false",
    RATE_LIMIT_PER_IP: "0",
    RATE_LIMIT_PER_FAN: "0",
    PAYMENT_TIMEOUT_MS: "1000",
  };
  const started = await Promise.all([
    startMainProcess({ role: "gateway", env, timeoutMs: 90_000 }),
    startMainProcess({ role: "gateway", env, timeoutMs: 90_000 }),
    startMainProcess({ role: "worker", env, timeoutMs: 90_000 }),
  ]);
  gateways.push(started[0], started[1]);
  worker = started[2];
  traffic = new Traffic(() => gateways[Math.floor(Math.random() * gateways.length)]!.url);

  // An integrator's consumer of the bookings queue, on the cluster too, under the watchdog (a
  // consumer stuck after a failover, taking nothing while bookings wait, is replaced).
  const bookingsQueue = createBookingsQueue(client);
  const consumerErrors: string[] = [];
  let lastHandled = 0;
  let current: Worker | undefined;
  const consumer = superviseBookings({
    connect: () => {
      const connection = connectRedis({ kind: "cluster", nodes: cluster.nodes }, "blocking");
      connection.on("error", () => {});
      return connection;
    },
    queue: bookingsQueue,
    stallMs: 20_000,
    inventory,
    logger,
    concurrency: 4,
    handle: async (booking) => {
      const seen = delivered.get(booking.eventId) ?? new Set<string>();
      seen.add(booking.purchaseId);
      delivered.set(booking.eventId, seen);
    },
    // What the consumer went through, for the failure message: its errors (BullMQ emits them and
    // goes on) and when its handler last ran.
    onStart: (w) => {
      current = w as unknown as Worker;
      w.on("error", (err: Error) => {
        consumerErrors.push(`${new Date().toISOString().slice(11, 23)} ${err.message}`);
        if (consumerErrors.length > 12) consumerErrors.shift();
      });
      w.on("completed", () => {
        lastHandled = Date.now();
      });
    },
  });
  consumerState = () => {
    // BullMQ 6's backend holds the worker's two connections (not public: read for this message only).
    const backend = (
      current as unknown as {
        backend?: {
          connection?: { _client?: { status?: string } };
          blockingConnection?: { _client?: { status?: string } };
        };
      }
    )?.backend;
    const since = lastHandled ? `${Math.round((Date.now() - lastHandled) / 1000)} s ago` : "never";
    return (
      `running ${current?.isRunning()}, paused ${current?.isPaused()}, replaced ${consumer.restarts} times, ` +
      `worker's ${backend?.connection?._client?.status}, blocking ${backend?.blockingConnection?._client?.status}, ` +
      `last job completed ${since}; last errors:\n  ${consumerErrors.join("\n  ") || "none"}`
    );
  };
  stopConsumer = async () => {
    // Forced: a blocking call on a master killed by the last scenario would hold a graceful close.
    await consumer.close(true);
    await bookingsQueue.close();
  };
}, 240_000);

afterAll(async () => {
  await stopConsumer?.();
  await Promise.allSettled([...gateways, ...(worker ? [worker] : [])].map((p) => p.stop("SIGKILL")));
  client?.disconnect();
  dynamo?.destroy();
  await cluster?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}, 60_000);

function logsOnFailure(): string {
  return [...gateways, ...(worker ? [worker] : [])]
    .map((p, i) => `--- process ${i} (pid ${p.pid})\n${p.logs.slice(-40).join("\n")}`)
    .join("\n");
}

/** Stores the event through gateway `via` (that gateway arms its job schedules and remembers them). */
async function putEvent(eventId: string, input = eventInput(), via = 0): Promise<void> {
  const res = await fetch(`${gateways[via]!.url}/v1/admin/events/${eventId}`, {
    method: "PUT",
    headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify(input),
  });
  if (res.status !== 201) throw new Error(`PUT ${eventId}: ${res.status} ${await res.text()}`);
}

/** No purchase of the event pending, nor failed on its way to a refund. */
async function waitUntilSettled(eventId: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const counts = await inventory.purchases.count({ eventId });
    let left = counts.pending;
    if (left === 0 && counts.failed > 0) {
      const failed = await inventory.purchases.list({ eventId, status: "failed", limit: 1_000 });
      left = failed.purchases.filter((p) => p.failureReason === REFUND_DUE).length;
    }
    if (left === 0) return;
    if (Date.now() > deadline) throw new Error(`${left} purchases of ${eventId} unsettled after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function expectAudit(eventId: string): Promise<void> {
  const report = await auditEvent(
    { inventory, payments: createSimulatedProvider({ redis: client, logger }) },
    eventId,
    { allowPending: false },
  );
  const failed = report.checks.filter((c) => c.status !== "pass");
  expect(failed, JSON.stringify(failed, null, 2)).toEqual([]);
  expect(report.ok).toBe(true);
}

/** Where each missing booking stands: its job's state in BullMQ, its outbox record, the consumer. */
async function describeMissing(eventId: string, missing: string[]): Promise<string> {
  const queue = createBookingsQueue(client);
  try {
    const rows = await Promise.all(
      missing.map(async (purchaseId) => {
        const [state, record] = await Promise.all([
          queue.getJobState(bookingJobId(purchaseId)).catch((e: Error) => `? ${e.message}`),
          inventory.outbox.get({ eventId, purchaseId }),
        ]);
        const handled = delivered.get(eventId)?.has(purchaseId) ? "handled" : "not handled";
        return `${purchaseId}: job ${state}, record ${record?.state ?? "none"}, ${handled}`;
      }),
    );
    const counts = await queue.getJobCounts().catch((e: Error) => ({ error: e.message }));
    return `${missing.length}\n${rows.join("\n")}\nqueue ${JSON.stringify(counts)}; consumer ${consumerState()}`;
  } finally {
    await queue.close();
  }
}

/**
 * The event's confirmed purchases in DynamoDB against what each fan was told: every purchase a fan
 * was told is confirmed (201) is confirmed, and every other confirmed one is a purchase a fan tried
 * whose answer left it open (202 pending, or a 503 or no answer retried until the sale gave up) and
 * that settled to confirmed afterwards (the payment saga's reconciliation). A purchase the fan was
 * told failed (declined, hold expired) is never confirmed. Returns the confirmed attempts.
 */
async function expectConfirmedAsFansWereTold(
  eventId: string,
  attempts: readonly PurchaseAttempt[],
): Promise<PurchaseAttempt[]> {
  const inDb = new Set(
    (await inventory.purchases.list({ eventId, status: "confirmed", limit: 1_000 })).purchases.map((p) => p.purchaseId),
  );
  const byId = new Map(attempts.map((a) => [a.purchaseId, a]));
  const told = attempts.filter((a) => a.end === "confirmed").map((a) => a.purchaseId);
  expect(
    told.filter((id) => !inDb.has(id)),
    "told confirmed, not confirmed",
  ).toEqual([]);
  const open = new Set<PurchaseEnd>(["pending", "unavailable", "no_answer"]);
  const unexplained = [...inDb].filter((id) => {
    const end = byId.get(id)?.end;
    return end !== "confirmed" && !(end !== undefined && open.has(end));
  });
  expect(
    unexplained.map((id) => `${id}: ${byId.get(id)?.end ?? "never tried"}`),
    "confirmed, not as told",
  ).toEqual([]);
  return [...inDb].map((id) => byId.get(id)!);
}

/** Every confirmed purchase of the event handled by the consumer and its record acknowledged. */
async function expectBookingsDelivered(eventId: string, timeoutMs = 60_000): Promise<number> {
  const confirmed = (await inventory.purchases.list({ eventId, status: "confirmed", limit: 1_000 })).purchases.map(
    (p) => p.purchaseId,
  );
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const seen = delivered.get(eventId) ?? new Set<string>();
    const records = await Promise.all(confirmed.map((purchaseId) => inventory.outbox.get({ eventId, purchaseId })));
    const missing = confirmed.filter((id, i) => !seen.has(id) || records[i]?.state !== "acknowledged");
    if (missing.length === 0) return confirmed.length;
    if (Date.now() > deadline) {
      throw new Error(`bookings not delivered: ${await describeMissing(eventId, missing)}\n${logsOnFailure()}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Reads a Server-Sent Events stream until `needle` shows up. */
async function openStream(url: string) {
  const controller = new AbortController();
  const res = await fetch(url, { signal: controller.signal });
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  return {
    async until(needle: string, timeoutMs = 20_000) {
      const timer = setTimeout(() => controller.abort(), timeoutMs);
      try {
        while (!text.includes(needle)) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`stream ended before ${needle}`);
          text += decoder.decode(value, { stream: true });
        }
      } catch (err) {
        throw new Error(`no ${needle} on the stream (${(err as Error).message}); got:\n${text}`);
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => controller.abort(),
  };
}

describe.sequential("the gateway and a worker on a 3-master Redis Cluster (with replicas)", () => {
  it("runs the fan journey over HTTP; a stream on the other gateway hears the seat changes", async () => {
    const eventId = events[0]!;
    await putEvent(eventId);
    const [a, b] = gateways.map((g) => g.url!) as [string, string];

    const join = await fetch(`${a}/v1/events/${eventId}/queue`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ fanId: "alice" }),
    });
    expect(join.status).toBe(201);
    const { queueToken, position } = (await join.json()) as { queueToken: string; position: number };
    expect(position).toBe(1);
    let accessToken: string | undefined;
    for (let i = 0; !accessToken; i++) {
      if (i > 200) throw new Error("alice was never admitted");
      const res = await fetch(`${i % 2 ? a : b}/v1/events/${eventId}/queue/status`, {
        headers: { authorization: `Bearer ${queueToken}` },
      });
      expect(res.status).toBe(200);
      accessToken = ((await res.json()) as { accessToken?: string }).accessToken;
    }
    const map = (await (await fetch(`${b}/v1/events/${eventId}/seatmap`)).json()) as {
      sections: { id: string; available: number }[];
    };
    expect(map.sections.map((s) => [s.id, s.available])).toEqual([
      ["A", 50],
      ["B", 20],
    ]);
    const seats = (await (await fetch(`${a}/v1/events/${eventId}/sections/A/seats`)).json()) as {
      seats: { id: string; status: string }[];
    };
    expect(seats.seats[0]).toEqual({ id: "A-1-1", status: "available" });

    const stream = await openStream(`${b}/v1/events/${eventId}/seatmap/stream`);
    try {
      await stream.until("event: ready");
      const auth = { authorization: `Bearer ${accessToken}`, "content-type": "application/json" };
      const hold = await fetch(`${a}/v1/events/${eventId}/holds`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ seats: ["A-1-1", "A-1-2"] }),
      });
      expect(hold.status).toBe(201);
      const { holdId } = (await hold.json()) as { holdId: string };
      await stream.until('{"id":"A-1-2","status":"held"}');
      const purchase = await fetch(`${a}/v1/events/${eventId}/holds/${holdId}/purchase`, {
        method: "POST",
        headers: { ...auth, "idempotency-key": "alice-1" },
        body: JSON.stringify({ paymentToken: "tok_ok" }),
      });
      expect(purchase.status).toBe(201);
      expect(((await purchase.json()) as { status: string }).status).toBe("confirmed");
      await stream.until('{"id":"A-1-2","status":"sold"}');
    } finally {
      stream.close();
    }
    const after = (await (await fetch(`${b}/v1/events/${eventId}/sections/A/seats`)).json()) as {
      seats: { status: string }[];
    };
    expect(after.seats.slice(0, 3).map((s) => s.status)).toEqual(["sold", "sold", "available"]);
    expect(await expectBookingsDelivered(eventId)).toBe(1);
    await expectAudit(eventId);
  }, 120_000);

  it("sells 40 seats to 60 fans at once: the audit passes and every booking is delivered", async () => {
    const eventId = events[1]!;
    const section = { id: "A", tier: "Floor", price: 5000, rows: 4, seatsPerRow: 10 };
    await putEvent(eventId, eventInput({ sections: [section], generalAdmission: [], maxSeatsPerFan: 2 }));
    const fans = await admitFans(
      traffic,
      eventId,
      Array.from({ length: 60 }, (_, i) => `fan-${i}`),
    );
    const sale = startSale(traffic, { eventId, fans, seats: seatIds(section), durationMs: 15_000, thinkMs: [20, 100] });
    const ledger = await sale.done;
    await waitUntilSettled(eventId);
    const counts = await inventory.purchases.count({ eventId });
    const confirmed = await expectConfirmedAsFansWereTold(eventId, ledger.purchases);
    expect(confirmed.length).toBe(counts.confirmed);
    const sold = confirmed.flatMap((p) => p.seats);
    expect(new Set(sold).size).toBe(sold.length);
    expect(sold.length).toBeGreaterThan(0);
    expect(traffic.violations, logsOnFailure()).toEqual([]);
    await expectAudit(eventId);
    expect(await expectBookingsDelivered(eventId)).toBe(counts.confirmed);
  }, 180_000);

  it("survives a master SIGKILLed during a sale: 503s with a code meanwhile, then served again, nothing oversold", async () => {
    const eventId = events[2]!;
    // 40 seats for the crowd; row 5 is kept for the stream's check after the failover.
    const section = { id: "A", tier: "Floor", price: 5000, rows: 5, seatsPerRow: 10 };
    await putEvent(eventId, eventInput({ sections: [section], generalAdmission: [], maxSeatsPerFan: 2 }));
    const fans: Fan[] = await admitFans(
      traffic,
      eventId,
      Array.from({ length: 60 }, (_, i) => `kfan-${i}`),
    );
    const [late] = await admitFans(traffic, eventId, ["late-fan"]);
    const stream = await openStream(`${gateways[1]!.url}/v1/events/${eventId}/seatmap/stream`);
    await stream.until("event: ready");
    const before = { ...traffic.counts };
    const violationsBefore = traffic.violations.length;
    const sale = startSale(traffic, {
      eventId,
      fans,
      seats: seatIds(section).slice(0, 40),
      durationMs: 20_000,
      graceMs: 40_000,
      thinkMs: [100, 400],
    });
    // Into the sale, with holds granted, the master of the event (and of the queues) goes.
    while (sale.ledger.holds.filter((h) => h.status === 201).length < 5) await new Promise((r) => setTimeout(r, 50));
    const dead = await ownerOf(client, roomKey(eventId));
    await killNode(nodeAt(cluster, dead));
    const killedAt = Date.now();
    const promoted = await waitForFailover(cluster, roomKey(eventId), dead);
    const failoverMs = Date.now() - killedAt;
    expect(promoted).not.toBe(dead);

    const ledger = await sale.done;
    // The master lost held the queues: the gateway that stored the event arms its job schedules
    // again once the slot map no longer names that master (the replica may not have had the last
    // writes).
    for (const p of [gateways[0]!]) {
      for (let i = 0; !p.logs.some((l) => l.includes("event job schedules armed again")); i++) {
        if (i > 150) throw new Error(`pid ${p.pid} did not arm its schedules again:\n${logsOnFailure()}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    // Served again: a join and the seat map answer on both gateways.
    for (const url of gateways.map((g) => g.url!)) {
      let status = 0;
      for (let i = 0; i < 100 && status !== 200; i++) {
        status = (await fetch(`${url}/v1/events/${eventId}/seatmap`)).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 200));
      }
      expect(status).toBe(200);
      // The seat map can answer from the gateway's memory while its cluster client still moves to
      // the new master; a join needs Redis, and answers 503 with Retry-After until then.
      let joined = 0;
      for (let i = 0; i < 100 && joined !== 201; i++) {
        const join = await fetch(`${url}/v1/events/${eventId}/queue`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ fanId: `late-${url}` }),
        });
        joined = join.status;
        if (joined === 503) await new Promise((r) => setTimeout(r, 200));
        else expect(joined).toBe(201);
      }
      expect(joined).toBe(201);
    }
    // The stream on the other gateway was resumed (its subscription moved to the new master) and
    // hears changes again.
    await stream.until('"resumed":true').catch((err: Error) => {
      // Seen once under CI's load (not reproduced alone in 6 runs): the relay's own account of
      // the failover says whether ioredis ever announced a new subscriber set.
      const relay = gateways[1]!.logs.filter((l) => l.includes("seat-change") || l.includes("relay"));
      throw new Error(`${err.message}\nfailover took ${failoverMs} ms; gateway 1's relay:\n${relay.join("\n")}`);
    });
    const hold = await traffic.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: late!.accessToken,
      json: { seats: ["A-5-1"] },
      kind: "hold",
    });
    expect(hold.status).toBe(201);
    await stream.until('{"id":"A-5-1","status":"held"}');
    stream.close();
    await waitUntilSettled(eventId);
    const sold = ledger.purchases.filter((p) => p.end === "confirmed").flatMap((p) => p.seats);
    expect(new Set(sold).size).toBe(sold.length);
    expect(sold.length).toBeLessThanOrEqual(40);
    await expectAudit(eventId);
    const counts = await inventory.purchases.count({ eventId });
    // A booking job whose move to active (or to completed) was answered by the master that died is
    // left active on its replica, and BullMQ takes it back only once its lock (30 s) has run out and
    // two stalled checks (every 30 s) have seen it: up to 90 s, and a retry after a failed move
    // waits runRetryDelay (15 s) more. A consumer stuck for good still fails here, saying where
    // each missing booking stands.
    expect(await expectBookingsDelivered(eventId, 150_000)).toBe(counts.confirmed);

    // What fans saw: 503s (with Retry-After and a code) or answers, never another 5xx.
    const during = {
      unavailable: traffic.counts.unavailable - before.unavailable,
      serverErrors: traffic.counts.serverErrors - before.serverErrors,
      noAnswer: traffic.counts.noAnswer - before.noAnswer,
    };
    expect(traffic.violations.slice(violationsBefore), logsOnFailure()).toEqual([]);
    expect(during.serverErrors).toBe(0);
    expect(during.noAnswer).toBe(0);
    expect(gateways.every((g) => g.alive()) && worker?.alive()).toBe(true);
    console.log(
      `cluster e2e: master ${dead} killed, ${promoted} took over after ${failoverMs} ms; ` +
        `${sold.length} seats sold; ${during.unavailable} 503s meanwhile; ${traffic.summary()}`,
    );
  }, 330_000);
});
