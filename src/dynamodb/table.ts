/**
 * The single table. Every entity (event, seat, general-admission area, hold, purchase, outbox
 * record) lives here, told apart by key prefixes and an `entity` attribute; key strings are
 * documented in docs/data-model.md and built only in src/inventory/keys.ts.
 *
 * GSI1 is sparse: only items that carry GSI1PK are in it (available seats of a section).
 * GSI2 is sparse and sharded: held seats (and holds) keyed by expiry, for the sweeper.
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  CreateTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  ResourceNotFoundException,
} from "@aws-sdk/client-dynamodb";

export const GSI1 = "GSI1";
export const GSI2 = "GSI2";

export async function tableExists(client: DynamoDBClient, tableName: string): Promise<boolean> {
  try {
    const out = await client.send(new DescribeTableCommand({ TableName: tableName }));
    return out.Table?.TableStatus === "ACTIVE";
  } catch (err) {
    if (err instanceof ResourceNotFoundException) return false;
    throw err;
  }
}

/** Creates the table if it does not exist and waits until it is ACTIVE. */
export async function ensureTable(client: DynamoDBClient, tableName: string): Promise<void> {
  if (await tableExists(client, tableName)) return;
  try {
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: "PAY_PER_REQUEST",
        AttributeDefinitions: [
          { AttributeName: "PK", AttributeType: "S" },
          { AttributeName: "SK", AttributeType: "S" },
          { AttributeName: "GSI1PK", AttributeType: "S" },
          { AttributeName: "GSI1SK", AttributeType: "S" },
          { AttributeName: "GSI2PK", AttributeType: "S" },
          { AttributeName: "GSI2SK", AttributeType: "S" },
        ],
        KeySchema: [
          { AttributeName: "PK", KeyType: "HASH" },
          { AttributeName: "SK", KeyType: "RANGE" },
        ],
        GlobalSecondaryIndexes: [
          {
            IndexName: GSI1,
            KeySchema: [
              { AttributeName: "GSI1PK", KeyType: "HASH" },
              { AttributeName: "GSI1SK", KeyType: "RANGE" },
            ],
            Projection: { ProjectionType: "ALL" },
          },
          {
            IndexName: GSI2,
            KeySchema: [
              { AttributeName: "GSI2PK", KeyType: "HASH" },
              { AttributeName: "GSI2SK", KeyType: "RANGE" },
            ],
            Projection: { ProjectionType: "ALL" },
          },
        ],
      }),
    );
  } catch (err) {
    // Another gateway instance created it first.
    if (!(err instanceof ResourceInUseException)) throw err;
  }
  const deadline = Date.now() + 60_000;
  while (!(await tableExists(client, tableName))) {
    if (Date.now() > deadline) throw new Error(`table ${tableName} did not become ACTIVE within 60 s`);
    await sleep(200);
  }
}
