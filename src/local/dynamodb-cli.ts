/**
 * `npm run dynamodb`: the local DynamoDB alone, on DYNAMODB_PORT (default 8000). Creates nothing.
 * LOCAL_DYNAMODB_MODE=aws (or --mode aws) makes it conflict and throttle as DynamoDB does.
 * Prints one JSON line with `listening` once ready (spawnLocalDynamoDB waits for it).
 */
import { ConfigError, loadLocalDynamoConfig } from "../config.js";
import { createLogger } from "../logger.js";
import { startLocalDynamoDB } from "./dynamodb.js";

const log = createLogger({ level: "info", name: "local-dynamodb" });

try {
  const config = loadLocalDynamoConfig(process.argv.slice(2));
  const db = await startLocalDynamoDB({
    port: config.port,
    host: config.host,
    ...(config.path ? { path: config.path } : {}),
    mode: config.mode,
    transactionMs: config.transactionMs,
    partitionWcu: config.partitionWcu,
    partitionRcu: config.partitionRcu,
  });
  log.info(
    {
      listening: db.port,
      endpoint: db.endpoint,
      path: config.path ?? "(memory)",
      mode: config.mode,
      ...(config.mode === "aws"
        ? { partitionWcu: config.partitionWcu, partitionRcu: config.partitionRcu, transactionMs: config.transactionMs }
        : {}),
    },
    "local DynamoDB listening",
  );
  const stop = () => {
    void db.close().then(() => process.exit(0));
    setTimeout(() => process.exit(0), 3_000).unref();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  if (process.argv.includes("--exit-with-parent")) {
    process.stdin.on("end", stop);
    process.stdin.on("error", stop);
    process.stdin.resume();
  }
} catch (err) {
  log.fatal({ err: err instanceof ConfigError ? err.message : err }, "local DynamoDB failed to start");
  process.exit(1);
}
