/**
 * Counts every DynamoDB command this client sends, by command and outcome, through the SDK's
 * middleware stack: the figure an operator compares with provisioned capacity and throttling.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { Metrics } from "../metrics.js";

export function instrumentDynamo(client: DynamoDBClient, metrics: Metrics): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = String(context.commandName ?? "unknown").replace(/Command$/, "");
      try {
        const out = await next(args);
        metrics.dynamoCommands.inc({ command, outcome: "ok" });
        return out;
      } catch (err) {
        metrics.dynamoCommands.inc({ command, outcome: (err as Error).name || "error" });
        throw err;
      }
    },
    { step: "initialize", name: "gatewayMetrics", override: true },
  );
}
