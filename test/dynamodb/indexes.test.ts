/**
 * DynamoDB conformance: global secondary indexes (sparse membership, range conditions on the index
 * sort key), Query with Select: COUNT, and BatchWriteItem with UnprocessedItems retried until empty.
 * GSI reads are eventually consistent on real DynamoDB, so index expectations are polled
 * (vi.waitFor); the local DynamoDB passes them on the first read.
 */
import { randomUUID } from "node:crypto";
import {
  type AttributeValue,
  BatchWriteItemCommand,
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  PutItemCommand,
  QueryCommand,
  type QueryCommandInput,
  UpdateItemCommand,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { createTestDynamoClient } from "../support/dynamo.js";

type Item = Record<string, AttributeValue>;

const table = `conf-gsi-${Date.now().toString(36)}-${randomUUID().slice(0, 8)}`;
let client: DynamoDBClient;
const eventually = { timeout: 20_000, interval: 100 };

const key = (pk: string, sk: string): Item => ({ PK: { S: pk }, SK: { S: sk } });

beforeAll(async () => {
  client = createTestDynamoClient(inject("dynamoEndpoint"));
  await client.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "PK", AttributeType: "S" },
        { AttributeName: "SK", AttributeType: "S" },
        { AttributeName: "heldBy", AttributeType: "S" },
        { AttributeName: "GPK", AttributeType: "S" },
        { AttributeName: "GSK", AttributeType: "S" },
      ],
      KeySchema: [
        { AttributeName: "PK", KeyType: "HASH" },
        { AttributeName: "SK", KeyType: "RANGE" },
      ],
      GlobalSecondaryIndexes: [
        {
          // Sparse: only items that have heldBy are in it.
          IndexName: "held",
          KeySchema: [{ AttributeName: "heldBy", KeyType: "HASH" }],
          Projection: { ProjectionType: "KEYS_ONLY" },
        },
        {
          IndexName: "byGroup",
          KeySchema: [
            { AttributeName: "GPK", KeyType: "HASH" },
            { AttributeName: "GSK", KeyType: "RANGE" },
          ],
          Projection: { ProjectionType: "ALL" },
        },
      ],
    }),
  );
  await vi.waitFor(
    async () => {
      const out = await client.send(new DescribeTableCommand({ TableName: table }));
      const statuses = [out.Table?.TableStatus, ...(out.Table?.GlobalSecondaryIndexes ?? []).map((g) => g.IndexStatus)];
      if (statuses.some((s) => s !== "ACTIVE")) throw new Error(`table/indexes are ${statuses.join(",")}`);
    },
    { timeout: 300_000, interval: 500 },
  );
});

afterAll(async () => {
  await client?.send(new DeleteTableCommand({ TableName: table }));
  client?.destroy();
});

async function queryAll(input: QueryCommandInput): Promise<Item[]> {
  const items: Item[] = [];
  let start: Item | undefined;
  do {
    const out = await client.send(new QueryCommand({ ...input, ...(start ? { ExclusiveStartKey: start } : {}) }));
    items.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start);
  return items;
}

describe("global secondary indexes", () => {
  it("keep a sparse index to exactly the items that have its key attribute", async () => {
    const p = randomUUID();
    const fan = `fan-${p}`;
    const heldBy = async () => {
      const items = await queryAll({
        TableName: table,
        IndexName: "held",
        KeyConditionExpression: "heldBy = :fan",
        ExpressionAttributeValues: { ":fan": { S: fan } },
      });
      return items.map((i) => i.SK?.S).sort();
    };

    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(p, "s1"), heldBy: { S: fan } } }));
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(p, "s2"), heldBy: { S: fan } } }));
    await client.send(new PutItemCommand({ TableName: table, Item: key(p, "s3") }));
    await vi.waitFor(async () => expect(await heldBy()).toEqual(["s1", "s2"]), eventually);

    // Removing the attribute takes the item out of the index; setting it puts it in.
    await client.send(
      new UpdateItemCommand({ TableName: table, Key: key(p, "s1"), UpdateExpression: "REMOVE heldBy" }),
    );
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key(p, "s3"),
        UpdateExpression: "SET heldBy = :fan",
        ExpressionAttributeValues: { ":fan": { S: fan } },
      }),
    );
    await vi.waitFor(async () => expect(await heldBy()).toEqual(["s2", "s3"]), eventually);

    // A put without the attribute replaces the item and its index entry; a delete removes both.
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(p, "s2"), note: { S: "released" } } }));
    await client.send(new DeleteItemCommand({ TableName: table, Key: key(p, "s3") }));
    await vi.waitFor(async () => expect(await heldBy()).toEqual([]), eventually);

    // KEYS_ONLY projection: the table key and the index key, nothing else.
    await client.send(
      new PutItemCommand({ TableName: table, Item: { ...key(p, "s4"), heldBy: { S: fan }, price: { N: "10" } } }),
    );
    await vi.waitFor(async () => {
      const out = await client.send(
        new QueryCommand({
          TableName: table,
          IndexName: "held",
          KeyConditionExpression: "heldBy = :fan",
          ExpressionAttributeValues: { ":fan": { S: fan } },
        }),
      );
      expect(out.Items).toEqual([{ ...key(p, "s4"), heldBy: { S: fan } }]);
    }, eventually);
  });

  it("answers a GSI Query with BETWEEN and <= on the index sort key, in sort-key order", async () => {
    const group = `group-${randomUUID()}`;
    for (let i = 1; i <= 12; i++) {
      const gsk = String(i).padStart(3, "0");
      await client.send(
        new PutItemCommand({
          TableName: table,
          Item: { ...key(`row-${randomUUID()}`, "A"), GPK: { S: group }, GSK: { S: gsk }, i: { N: String(i) } },
        }),
      );
    }
    const sortKeys = (items: Item[]) => items.map((i) => i.GSK?.S);

    await vi.waitFor(async () => {
      const between = await queryAll({
        TableName: table,
        IndexName: "byGroup",
        KeyConditionExpression: "GPK = :g AND GSK BETWEEN :lo AND :hi",
        ExpressionAttributeValues: { ":g": { S: group }, ":lo": { S: "004" }, ":hi": { S: "008" } },
      });
      expect(sortKeys(between)).toEqual(["004", "005", "006", "007", "008"]);
    }, eventually);

    const upTo = await queryAll({
      TableName: table,
      IndexName: "byGroup",
      KeyConditionExpression: "GPK = :g AND GSK <= :hi",
      ExpressionAttributeValues: { ":g": { S: group }, ":hi": { S: "003" } },
    });
    expect(sortKeys(upTo)).toEqual(["001", "002", "003"]);

    const descending = await queryAll({
      TableName: table,
      IndexName: "byGroup",
      KeyConditionExpression: "GPK = :g AND GSK <= :hi",
      ExpressionAttributeValues: { ":g": { S: group }, ":hi": { S: "003" } },
      ScanIndexForward: false,
    });
    expect(sortKeys(descending)).toEqual(["003", "002", "001"]);

    const counted = await client.send(
      new QueryCommand({
        TableName: table,
        IndexName: "byGroup",
        KeyConditionExpression: "GPK = :g AND GSK BETWEEN :lo AND :hi",
        ExpressionAttributeValues: { ":g": { S: group }, ":lo": { S: "002" }, ":hi": { S: "011" } },
        Select: "COUNT",
      }),
    );
    expect(counted.Count).toBe(10);
    expect(counted.Items).toBeUndefined();
  });
});

describe("Query with Select: COUNT", () => {
  it("counts the matching items and returns none of them", async () => {
    const p = randomUUID();
    for (let i = 0; i < 7; i++) {
      await client.send(
        new PutItemCommand({
          TableName: table,
          Item: { ...key(p, `seat#${i}`), state: { S: i < 3 ? "held" : "free" } },
        }),
      );
    }
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(p, "meta"), state: { S: "held" } } }));

    const all = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: "PK = :p AND begins_with(SK, :seat)",
        ExpressionAttributeValues: { ":p": { S: p }, ":seat": { S: "seat#" } },
        Select: "COUNT",
        ConsistentRead: true,
      }),
    );
    expect(all.Count).toBe(7);
    expect(all.Items).toBeUndefined();

    const held = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: "PK = :p AND begins_with(SK, :seat)",
        FilterExpression: "#st = :held",
        ExpressionAttributeNames: { "#st": "state" },
        ExpressionAttributeValues: { ":p": { S: p }, ":seat": { S: "seat#" }, ":held": { S: "held" } },
        Select: "COUNT",
        ConsistentRead: true,
      }),
    );
    expect(held.Count).toBe(3);
    expect(held.ScannedCount).toBe(7);
    expect(held.Items).toBeUndefined();
  });
});

describe("BatchWriteItem", () => {
  it("writes many items, retrying UnprocessedItems until none are left", async () => {
    const p = randomUUID();
    const total = 260;
    const requests: WriteRequest[] = Array.from({ length: total }, (_, i) => ({
      PutRequest: { Item: { ...key(p, `item#${String(i).padStart(4, "0")}`), n: { N: String(i) } } },
    }));

    let batches = 0;
    for (let i = 0; i < requests.length; i += 25) {
      let pending: Record<string, WriteRequest[]> = { [table]: requests.slice(i, i + 25) };
      while (Object.keys(pending).length > 0) {
        expect(++batches, "UnprocessedItems never drained").toBeLessThan(2_000);
        const out = await client.send(new BatchWriteItemCommand({ RequestItems: pending }));
        pending = out.UnprocessedItems ?? {};
      }
    }

    const counted = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: "PK = :p",
        ExpressionAttributeValues: { ":p": { S: p } },
        Select: "COUNT",
        ConsistentRead: true,
      }),
    );
    expect(counted.Count).toBe(total);

    // Deletes in a batch too, then the partition is empty.
    for (let i = 0; i < total; i += 25) {
      let pending: Record<string, WriteRequest[]> = {
        [table]: requests.slice(i, i + 25).map((r) => ({
          DeleteRequest: { Key: key(p, r.PutRequest!.Item!.SK!.S!) },
        })),
      };
      while (Object.keys(pending).length > 0) {
        const out = await client.send(new BatchWriteItemCommand({ RequestItems: pending }));
        pending = out.UnprocessedItems ?? {};
      }
    }
    const left = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: "PK = :p",
        ExpressionAttributeValues: { ":p": { S: p } },
        Select: "COUNT",
        ConsistentRead: true,
      }),
    );
    expect(left.Count).toBe(0);
  });
});
