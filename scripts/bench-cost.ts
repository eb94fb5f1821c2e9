/**
 * `npm run bench:cost`: what a sold seat costs in DynamoDB capacity, every guarantee kept and the
 * background jobs included, per inventory operation.
 *
 * One gateway and its workers in this process (buildServices, as main builds them), a bookings
 * consumer acknowledging every BookingConfirmed (the integrator), a Redis and a local DynamoDB of
 * their own. The DynamoDB client is metered (src/dynamodb/capacity.ts): every command asks for
 * `ReturnConsumedCapacity: INDEXES`, and what DynamoDB reports is filed under the inventory
 * operation that sent it. Then, through HTTP as fans do:
 *
 *   1. COST_SEATS fans, each holds one seat and buys it (one in flight per fan, COST_CONCURRENCY
 *      fans at once); the outbox is drained (every booking acknowledged);
 *   2. COST_PLACES fans, each holds one general-admission place and buys it; drained likewise;
 *   3. COST_IDLE_SECONDS with nothing to do: what the background costs per second for an event
 *      nobody is buying from.
 *
 * Prints a table per phase (operation, requests, refused, read and write units, of which index
 * units) and the units per sold seat, then one JSON line. Units a condition failure or a cancelled
 * transaction costs are not in DynamoDB's answers; `refused` counts those requests.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { z } from "zod";
import { type CapacityRow, createCapacityMeter, meterCapacity } from "../src/dynamodb/capacity.js";
import { ensureTable } from "../src/dynamodb/table.js";
import { buildApp } from "../src/http/app.js";
import { listenApp } from "../src/http/serve.js";
import { spawnLocalDynamoDB } from "../src/local/dynamodb.js";
import { spawnRedis } from "../src/local/redis.js";
import { createMetrics } from "../src/metrics.js";
import { buildServices } from "../src/services.js";
import { consumeBookings } from "../src/workers/bookings-consumer.js";
import { ADMIN, admitAll, call } from "./bench-gateway.js";
import { timed } from "./lib/in-flight.js";

const env = z
  .object({
    COST_SEATS: z.coerce.number().int().positive().default(60),
    COST_PLACES: z.coerce.number().int().nonnegative().default(30),
    COST_CONCURRENCY: z.coerce.number().int().positive().default(16),
    COST_IDLE_SECONDS: z.coerce.number().nonnegative().default(10),
    /** Print the JSON line only (scripts/bench.ts reads it). */
    COST_JSON: z.string().optional(),
  })
  .parse(process.env);

const quiet = env.COST_JSON === "1";
const say = (line: string) => {
  if (!quiet) process.stderr.write(`${line}\n`);
};

export interface CostPhase {
  phase: string;
  sold: number;
  seconds: number;
  rows: CapacityRow[];
  total: CapacityRow;
}

function table(phase: CostPhase): string {
  const per = (n: number) => (phase.sold > 0 ? (n / phase.sold).toFixed(2) : "-");
  const lines = [
    `${phase.phase}: ${phase.sold} sold in ${phase.seconds.toFixed(1)} s`,
    "operation                       requests refused   read WCU/RCU   write   (index r/w)   write per sold",
  ];
  for (const r of [...phase.rows, phase.total]) {
    lines.push(
      [
        r.operation.padEnd(30),
        String(r.requests).padStart(9),
        String(r.refused).padStart(8),
        r.readUnits.toFixed(1).padStart(10),
        r.writeUnits.toFixed(1).padStart(11),
        `(${r.indexReadUnits.toFixed(1)}/${r.indexWriteUnits.toFixed(1)})`.padStart(14),
        per(r.writeUnits).padStart(12),
      ].join(" "),
    );
  }
  return lines.join("\n");
}

/** Resolves once `count()` reaches `want` (bookings acknowledged: the outbox's whole life is in the phase). */
async function until(count: () => number, want: number): Promise<void> {
  for (let i = 0; i < 600 && count() < want; i++) await sleep(100);
  if (count() < want) throw new Error(`${count()} of ${want} bookings acknowledged within 60 s`);
}

async function main() {
  const redis = await spawnRedis();
  const dynamo = await spawnLocalDynamoDB({ port: 0 });
  const table_ = `cost_${Date.now()}`;
  const logger = pino({ level: "warn" });
  const services = buildServices({
    redisUrl: redis.url,
    dynamodb: { endpoint: dynamo.endpoint, region: "us-east-1", table: table_ },
    logger,
    metrics: createMetrics(),
    adminToken: ADMIN,
    gatewaySecret: "cost-bench-gateway-secret-0123456789",
    limits: { ratePerIp: 0, ratePerFan: 0, ratePerOperatorIp: 0 },
    queues: true,
  });
  await ensureTable(services.clients.dynamo, table_);
  const meter = createCapacityMeter();
  meterCapacity(services.clients.dynamo, meter);
  services.startWorkers();
  const { Redis } = await import("ioredis");
  const consumerConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const consumer = consumeBookings({
    connection: consumerConnection,
    inventory: services.inventory,
    handle: async () => {},
    logger,
    concurrency: 8,
  });
  // Counted from the consumer's side, so that waiting for the drain reads nothing from DynamoDB.
  let acknowledged = 0;
  consumer.on("completed", (_job, result) => {
    if (result.acknowledged) acknowledged++;
  });
  const app = buildApp(services);
  const { server } = await listenApp({ fetch: app.fetch, fastPath: app.fastPath, port: 0, host: "127.0.0.1" });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const phases: CostPhase[] = [];
  try {
    const eventId = `cost${Date.now()}`;
    const perRow = 20;
    const put = await call(`${url}/v1/admin/events/${eventId}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN}` },
      json: {
        name: "Cost of a sold seat",
        onSaleAt: new Date(Date.now() - 1000).toISOString(),
        holdSeconds: 600,
        maxSeatsPerFan: 4,
        sections: [{ id: "A", tier: "T", price: 5000, rows: Math.ceil(env.COST_SEATS / perRow), seatsPerRow: perRow }],
        generalAdmission: env.COST_PLACES > 0 ? [{ id: "GA", tier: "T", price: 3000, capacity: env.COST_PLACES }] : [],
        waitingRoom: { admitPerSecond: 100_000, maxActive: 1_000_000, sessionSeconds: 3600 },
      },
    });
    if (put.status !== 201) throw new Error(`event not created: ${put.status} ${JSON.stringify(put.body)}`);
    const fans = Array.from({ length: env.COST_SEATS + env.COST_PLACES }, (_, i) => `fan${i}`);
    const { accessTokens } = await admitAll(url, eventId, fans, 64);
    const post = (path: string, token: string, body: unknown, key?: string) =>
      call<{ holdId?: string; status?: string }>(`${url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, ...(key ? { "idempotency-key": key } : {}) },
        json: body,
      });
    const buy = async (i: number, claim: unknown): Promise<boolean> => {
      const token = accessTokens[i]!;
      const h = await post(`/v1/events/${eventId}/holds`, token, claim);
      if (h.status !== 201 || !h.body.holdId) return false;
      const p = await post(
        `/v1/events/${eventId}/holds/${h.body.holdId}/purchase`,
        token,
        { paymentToken: "tok_ok" },
        `cost-${i}`,
      );
      return p.status === 201;
    };
    const phase = async (name: string, count: number, claim: (k: number) => unknown, offset: number) => {
      await sleep(500);
      meter.reset();
      const started = performance.now();
      const ackedBefore = acknowledged;
      let sold = 0;
      await timed(count, env.COST_CONCURRENCY, async (k) => {
        if (await buy(offset + k, claim(k))) sold++;
      });
      await until(() => acknowledged - ackedBefore, sold);
      const p = {
        phase: name,
        sold,
        seconds: (performance.now() - started) / 1000,
        rows: meter.rows(),
        total: meter.total(),
      };
      phases.push(p);
      say(table(p));
      say("");
    };
    const seat = (k: number) => `A-${Math.floor(k / perRow) + 1}-${(k % perRow) + 1}`;
    await phase("seats (hold one seat, buy it)", env.COST_SEATS, (k) => ({ seats: [seat(k)] }), 0);
    if (env.COST_PLACES > 0) {
      await phase(
        "general admission (hold one place, buy it)",
        env.COST_PLACES,
        () => ({ generalAdmission: { id: "GA", quantity: 1 } }),
        env.COST_SEATS,
      );
    }
    if (env.COST_IDLE_SECONDS > 0) {
      meter.reset();
      await sleep(env.COST_IDLE_SECONDS * 1000);
      const p = {
        phase: `idle ${env.COST_IDLE_SECONDS} s`,
        sold: 0,
        seconds: env.COST_IDLE_SECONDS,
        rows: meter.rows(),
        total: meter.total(),
      };
      phases.push(p);
      say(table(p));
      say(
        `background while idle: ${(p.total.readUnits / p.seconds).toFixed(2)} read and ${(p.total.writeUnits / p.seconds).toFixed(2)} write units/s for one event`,
      );
    }
    const perSeat = phases[0]!;
    process.stdout.write(
      `${JSON.stringify({
        writeUnitsPerSeat: perSeat.total.writeUnits / Math.max(1, perSeat.sold),
        readUnitsPerSeat: perSeat.total.readUnits / Math.max(1, perSeat.sold),
        indexWriteUnitsPerSeat: perSeat.total.indexWriteUnits / Math.max(1, perSeat.sold),
        refusedPerSeat: perSeat.total.refused / Math.max(1, perSeat.sold),
        phases: phases.map((p) => ({
          phase: p.phase,
          sold: p.sold,
          seconds: p.seconds,
          total: p.total,
          rows: p.rows,
        })),
      })}\n`,
    );
  } finally {
    server.close();
    await consumer.close().catch(() => {});
    consumerConnection.disconnect();
    await services.close().catch(() => {});
    await dynamo.close();
    await redis.close();
  }
}

await main();
