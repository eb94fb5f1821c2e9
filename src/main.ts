/**
 * The composition root: parse config, find or start Redis and DynamoDB, build each client once,
 * hand them to the app, serve, and shut down in order on SIGTERM/SIGINT.
 */
import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import { serve } from "@hono/node-server";
import { Redis } from "ioredis";
import { startServices } from "./bootstrap.js";
import { ConfigError, loadGatewayConfig } from "./config.js";
import { createDynamoClient } from "./dynamodb/client.js";
import { ensureTable } from "./dynamodb/table.js";
import { buildApp } from "./http/app.js";
import { createLogger } from "./logger.js";

async function main(): Promise<void> {
  let config: ReturnType<typeof loadGatewayConfig>;
  try {
    config = loadGatewayConfig();
  } catch (err) {
    createLogger({ level: "info" }).fatal(err instanceof ConfigError ? err.message : { err }, "cannot start");
    process.exit(1);
  }
  const log = createLogger({ level: config.logLevel });
  const services = await startServices(config, log);

  const redis = new Redis(services.redisUrl, { maxRetriesPerRequest: 2, enableAutoPipelining: true });
  redis.on("error", (err) => log.warn({ err: err.message }, "redis connection error"));
  const dynamo = createDynamoClient({ endpoint: services.dynamoEndpoint, region: config.dynamodb.region });
  await ensureTable(dynamo, config.dynamodb.table);

  const app = buildApp({
    logger: log,
    health: {
      redis: { check: async () => void (await redis.ping()) },
      dynamodb: {
        check: async () => void (await dynamo.send(new DescribeTableCommand({ TableName: config.dynamodb.table }))),
      },
    },
  });

  const server = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, (info) => {
    log.info(
      {
        url: `http://localhost:${info.port}`,
        redis: services.redisUrl,
        dynamodb: services.dynamoEndpoint ?? "AWS",
        table: config.dynamodb.table,
      },
      "gateway listening",
    );
    log.info({ adminToken: undefined }, `operator token: ${services.adminToken}`);
  });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    redis.disconnect();
    dynamo.destroy();
    await services.stop();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

await main();
