import { CreateTableCommand, DescribeTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { vi } from "vitest";
import { createDynamoClient } from "../../src/dynamodb/client.js";

/** A client for the endpoint the global setup provides (local DynamoDB unless DYNAMODB_ENDPOINT is set). */
export function createTestDynamoClient(endpoint: string): DynamoDBClient {
  // One attempt, so a conformance test sees every error as it is; a long request timeout, so a
  // request queued behind another file's load on the one shared local DynamoDB is not cut off.
  return createDynamoClient({
    endpoint,
    region: "us-east-1",
    maxSockets: 512,
    maxAttempts: 1,
    requestTimeoutMs: 60_000,
  });
}

/** Creates a PK/SK string-keyed table (no indexes) for a conformance test and waits until it is ACTIVE. */
export async function createKeyValueTable(client: DynamoDBClient, table: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "PK", AttributeType: "S" },
        { AttributeName: "SK", AttributeType: "S" },
      ],
      KeySchema: [
        { AttributeName: "PK", KeyType: "HASH" },
        { AttributeName: "SK", KeyType: "RANGE" },
      ],
    }),
  );
  await vi.waitFor(
    async () => {
      const out = await client.send(new DescribeTableCommand({ TableName: table }));
      if (out.Table?.TableStatus !== "ACTIVE") throw new Error(`table is ${out.Table?.TableStatus}`);
    },
    { timeout: 120_000, interval: 200 },
  );
}

/** A table as the gateway made it before the open-purchases index (GSI3): GSI1 and GSI2 only. */
export async function createTableBeforeGsi3(client: DynamoDBClient, table: string): Promise<void> {
  const gsi = (n: string) => ({
    IndexName: n,
    KeySchema: [
      { AttributeName: `${n}PK`, KeyType: "HASH" as const },
      { AttributeName: `${n}SK`, KeyType: "RANGE" as const },
    ],
    Projection: { ProjectionType: "ALL" as const },
  });
  await client.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: ["PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK"].map((a) => ({
        AttributeName: a,
        AttributeType: "S" as const,
      })),
      KeySchema: [
        { AttributeName: "PK", KeyType: "HASH" },
        { AttributeName: "SK", KeyType: "RANGE" },
      ],
      GlobalSecondaryIndexes: [gsi("GSI1"), gsi("GSI2")],
    }),
  );
}
