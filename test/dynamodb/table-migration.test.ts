/**
 * The table's open-purchases index (GSI3, KEYS_ONLY) and tables made before it: `ensureTable`
 * makes a new table with it, and a table without it is either given it (DynamoDB: UpdateTable,
 * Create) or, where the endpoint cannot add an index (dynalite), refused with what to do, never
 * used half-made (docs/data-model.md, "GSI3 and the tables made before it").
 */
import { randomUUID } from "node:crypto";
import { DescribeTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ensureTable, GSI3 } from "../../src/dynamodb/table.js";
import { createTableBeforeGsi3, createTestDynamoClient } from "../support/dynamo.js";

let client: DynamoDBClient;
beforeAll(() => {
  client = createTestDynamoClient(inject("dynamoEndpoint"));
});
afterAll(() => client?.destroy());

describe("ensureTable and GSI3", () => {
  it("makes a new table with the open-purchases index, keys only", async () => {
    const name = `gsi3_new_${randomUUID().slice(0, 8)}`;
    await ensureTable(client, name);
    const out = await client.send(new DescribeTableCommand({ TableName: name }));
    const gsi3 = out.Table?.GlobalSecondaryIndexes?.find((i) => i.IndexName === GSI3);
    expect(gsi3?.Projection?.ProjectionType).toBe("KEYS_ONLY");
    expect(gsi3?.KeySchema?.map((k) => k.AttributeName)).toEqual(["GSI3PK", "GSI3SK"]);
    // Again: an existing table with GSI3 is taken as it is.
    await ensureTable(client, name);
  });

  it("refuses a table made before GSI3 that the endpoint cannot give the index", async () => {
    const name = `gsi3_old_${randomUUID().slice(0, 8)}`;
    await createTableBeforeGsi3(client, name);
    // dynalite accepts the UpdateTable and adds nothing.
    await expect(ensureTable(client, name, { indexTimeoutMs: 5_000 })).rejects.toThrow(
      /made before the open-purchases index \(GSI3\)/,
    );
  });
});
