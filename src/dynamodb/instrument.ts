/**
 * Every DynamoDB command this client sends, through the SDK's middleware stack: counted by command
 * and final outcome, timed (the SDK's retries included), and each failed attempt counted by its
 * error, so throttles the SDK retried away still show (a partition near its limit is seen before a
 * request fails for it).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { Metrics } from "../metrics.js";

export function instrumentDynamo(client: DynamoDBClient, metrics: Metrics): void {
  const commandOf = (context: { commandName?: string }) =>
    String(context.commandName ?? "unknown").replace(/Command$/, "");
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = commandOf(context);
      const started = performance.now();
      try {
        const out = await next(args);
        metrics.dynamoCommands.inc({ command, outcome: "ok" });
        metrics.dynamoDuration.observe({ command, outcome: "ok" }, (performance.now() - started) / 1000);
        return out;
      } catch (err) {
        metrics.dynamoCommands.inc({ command, outcome: (err as Error).name || "error" });
        metrics.dynamoDuration.observe({ command, outcome: "error" }, (performance.now() - started) / 1000);
        throw err;
      }
    },
    { step: "initialize", name: "gatewayMetrics", override: true },
  );
  // The deserialize step runs once per attempt, inside the retry middleware (finalizeRequest).
  client.middlewareStack.add(
    (next, context) => async (args) => {
      try {
        return await next(args);
      } catch (err) {
        metrics.dynamoAttemptErrors.inc({ command: commandOf(context), error: (err as Error).name || "error" });
        throw err;
      }
    },
    { step: "deserialize", priority: "high", name: "gatewayAttemptMetrics", override: true },
  );
}
