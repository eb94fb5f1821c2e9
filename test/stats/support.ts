/**
 * Gateways for the stats tests, built as src/main.ts builds one (buildServices, buildApp) on the
 * real Redis and the local DynamoDB, with the stats intervals shortened, and a count of what each
 * sends to DynamoDB: requests by command and items read (a Query's ScannedCount, a GetItem's
 * item), through a middleware on the real client.
 */
import { inject } from "vitest";
import { buildApp } from "../../src/http/app.js";
import type { RedisTarget } from "../../src/redis/connect.js";
import { buildServices } from "../../src/services.js";
import type { EventStatsOptions } from "../../src/stats/index.js";
import { type Gateway, gatewayOf, testServicesConfig } from "../gateway/harness.js";

export interface DynamoReads {
  requests: Record<string, number>;
  /** Items the store read to answer (what grows with an event's seats). */
  items: number;
  /** Queries of seat partitions (`SEAT#` keys): one per section per count of the event's seats. */
  seatQueries: number;
}

export interface CountedGateway extends Gateway {
  reads: DynamoReads;
  resetReads(): void;
}

export function startCountedGateway(
  tableName: string,
  stats: EventStatsOptions = {},
  /** A Redis Cluster (or another server); default the tests' Redis. */
  redis?: RedisTarget,
): CountedGateway {
  const { redisUrl, ...config } = testServicesConfig({ tableName, redisUrl: inject("redisUrl") });
  const services = buildServices({
    ...config,
    ...(redis ? { redis } : { redisUrl }),
    ...(redis?.kind === "cluster" ? {} : { redisOptions: { maxRetriesPerRequest: 1, enableAutoPipelining: true } }),
    stats,
  });
  const gw: CountedGateway = {
    ...gatewayOf(buildApp(services), services),
    reads: { requests: {}, items: 0, seatQueries: 0 },
    resetReads() {
      gw.reads = { requests: {}, items: 0, seatQueries: 0 };
    },
  };
  services.clients.dynamo.middlewareStack.add(
    (next, context) => async (args) => {
      const out = await next(args);
      const command = String(context.commandName).replace(/Command$/, "");
      const reads = gw.reads;
      reads.requests[command] = (reads.requests[command] ?? 0) + 1;
      const output = out.output as { ScannedCount?: number; Item?: unknown; Responses?: Record<string, unknown[]> };
      if (typeof output.ScannedCount === "number") reads.items += output.ScannedCount;
      if (output.Item) reads.items += 1;
      for (const items of Object.values(output.Responses ?? {})) reads.items += Array.isArray(items) ? items.length : 0;
      const input = args.input as { ExpressionAttributeValues?: Record<string, unknown> };
      if (command === "Query" && JSON.stringify(input.ExpressionAttributeValues ?? {}).includes('"SEAT#"')) {
        reads.seatQueries++;
      }
      return out;
    },
    { step: "initialize", name: "testReadCounter" },
  );
  return gw;
}
