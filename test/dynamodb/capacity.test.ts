/**
 * ConsumedCapacity as DynamoDB answers it (docs/local-dynamodb.md, "Capacity units"), for every
 * kind of operation, against the patched dynalite started here (default mode: the units are exact
 * in both modes) on the application's own table (two GSIs, projection ALL: src/dynamodb/table.ts).
 *
 * Sizes are chosen far from unit boundaries: an item here is its key attributes (~40 bytes) plus
 * a padding string, so `pad(2_800)` is 3 write units and 1 read unit, `pad(9_000)` 9 and 3.
 */
import { randomUUID } from "node:crypto";
import {
  type AttributeValue,
  BatchGetItemCommand,
  BatchWriteItemCommand,
  type ConsumedCapacity,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactGetItemsCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureTable } from "../../src/dynamodb/table.js";
import { type LocalDynamoDB, startLocalDynamoDB } from "../../src/local/dynamodb.js";
import { createTestDynamoClient } from "../support/dynamo.js";

type Item = Record<string, AttributeValue>;

const table = "capacity";
let db: LocalDynamoDB;
let client: DynamoDBClient;

const key = (pk: string, sk = "A"): Item => ({ PK: { S: pk }, SK: { S: sk } });
const pad = (bytes: number): Item => ({ padding: { S: "x".repeat(bytes) } });
const inGsi1 = (pk: string, sk = "1"): Item => ({ GSI1PK: { S: pk }, GSI1SK: { S: sk } });
const inGsi2 = (pk: string, sk = "1"): Item => ({ GSI2PK: { S: pk }, GSI2SK: { S: sk } });
const ns = () => randomUUID();
const INDEXES = { ReturnConsumedCapacity: "INDEXES" } as const;

/**
 * ConsumedCapacity under INDEXES: total, table, and each GSI charged. `split`: with
 * WriteCapacityUnits / ReadCapacityUnits beside CapacityUnits, as DynamoDB answers a transaction
 * (always) and a batch (for a table whose indexes it charged); a single-item operation answers
 * CapacityUnits alone (docs/local-dynamodb.md).
 */
function consumed(
  field: "WriteCapacityUnits" | "ReadCapacityUnits",
  table_: number,
  gsis: Record<string, number>,
  split: boolean,
): ConsumedCapacity {
  const units = (n: number) => (split ? { CapacityUnits: n, [field]: n } : { CapacityUnits: n });
  const total = table_ + Object.values(gsis).reduce((a, b) => a + b, 0);
  return {
    TableName: table,
    ...units(total),
    Table: units(table_),
    ...(Object.keys(gsis).length
      ? { GlobalSecondaryIndexes: Object.fromEntries(Object.entries(gsis).map(([name, u]) => [name, units(u)])) }
      : {}),
  };
}

const write = (table_: number, gsis: Record<string, number> = {}, split = false) =>
  consumed("WriteCapacityUnits", table_, gsis, split);
const read = (table_: number, gsis: Record<string, number> = {}, split = false) =>
  consumed("ReadCapacityUnits", table_, gsis, split);

async function put(item: Item) {
  return (await client.send(new PutItemCommand({ TableName: table, Item: item, ...INDEXES }))).ConsumedCapacity;
}

async function update(k: Item, expression: string, values?: Item) {
  const out = await client.send(
    new UpdateItemCommand({
      TableName: table,
      Key: k,
      UpdateExpression: expression,
      ...(values ? { ExpressionAttributeValues: values } : {}),
      ...INDEXES,
    }),
  );
  return out.ConsumedCapacity;
}

beforeAll(async () => {
  db = await startLocalDynamoDB({ port: 0 });
  client = createTestDynamoClient(db.endpoint);
  await ensureTable(client, table);
});

afterAll(async () => {
  client?.destroy();
  await db?.close();
});

describe("single-item writes: 1 KB units of the larger of before and after, 1 at least", () => {
  it("PutItem: the item, and each GSI it enters at the entry's size", async () => {
    const p = ns();
    expect(await put({ ...key(p, "small") })).toEqual(write(1));
    expect(await put({ ...key(p, "big"), ...pad(2_800) })).toEqual(write(3));
    expect(await put({ ...key(p, "both"), ...pad(2_800), ...inGsi1(p), ...inGsi2(p) })).toEqual(
      write(3, { GSI1: 3, GSI2: 3 }),
    );
    // replacing a 3 KB item by a small one costs the larger, the old one
    expect(await put({ ...key(p, "big") })).toEqual(write(3));
    // TOTAL: no breakdown; a single-item write answers CapacityUnits alone, as DynamoDB does
    const total = await client.send(
      new PutItemCommand({
        TableName: table,
        Item: { ...key(p, "total"), ...pad(2_800), ...inGsi1(p) },
        ReturnConsumedCapacity: "TOTAL",
      }),
    );
    expect(total.ConsumedCapacity).toEqual({ TableName: table, CapacityUnits: 6 });
  });

  it("sizes are UTF-8 bytes: 600 'é' are 1,200 bytes, 2 units", async () => {
    expect(await put({ ...key(ns()), s: { S: "é".repeat(600) } })).toEqual(write(2));
  });

  it("UpdateItem: an index entry changed in place 1 write, its key changed 2, removed 1, none if not in the index", async () => {
    const p = ns();
    await put({ ...key(p), ...pad(100), ...inGsi1(p, "a") });
    // a non-key attribute of an item that stays in GSI1 (projection ALL)
    expect(await update(key(p), "SET n = :n", { ":n": { N: "1" } })).toEqual(write(1, { GSI1: 1 }));
    // GSI1's sort key changes: delete the old entry, put the new one
    expect(await update(key(p), "SET GSI1SK = :b", { ":b": { S: "b" } })).toEqual(write(1, { GSI1: 2 }));
    // enters GSI2
    expect(await update(key(p), "SET GSI2PK = :p, GSI2SK = :s", { ":p": { S: p }, ":s": { S: "1" } })).toEqual(
      write(1, { GSI1: 1, GSI2: 1 }),
    );
    // leaves GSI1 (the entry deleted), stays in GSI2 with a changed entry
    expect(await update(key(p), "REMOVE GSI1PK")).toEqual(write(1, { GSI1: 1, GSI2: 1 }));
    // grows to 9 KB: the table and the index entries at the larger, new size
    expect(await update(key(p), "SET padding = :pad", { ":pad": { S: "x".repeat(9_000) } })).toEqual(
      write(9, { GSI2: 9 }),
    );
    // not in any index
    const q = ns();
    await put({ ...key(q) });
    expect(await update(key(q), "SET n = :n", { ":n": { N: "1" } })).toEqual(write(1));
  });

  it("DeleteItem: the old item, its index entries deleted; a missing item 1", async () => {
    const p = ns();
    await put({ ...key(p), ...pad(2_800), ...inGsi2(p) });
    const out = await client.send(new DeleteItemCommand({ TableName: table, Key: key(p), ...INDEXES }));
    expect(out.ConsumedCapacity).toEqual(write(3, { GSI2: 3 }));
    const missing = await client.send(new DeleteItemCommand({ TableName: table, Key: key(p), ...INDEXES }));
    expect(missing.ConsumedCapacity).toEqual(write(1));
  });

  it("BatchWriteItem: each request's units, summed per table", async () => {
    const p = ns();
    await put({ ...key(p, "gone"), ...inGsi1(p) });
    const out = await client.send(
      new BatchWriteItemCommand({
        RequestItems: {
          [table]: [
            { PutRequest: { Item: { ...key(p, "a"), ...pad(2_800) } } },
            { PutRequest: { Item: { ...key(p, "b"), ...inGsi1(p, "b") } } },
            { DeleteRequest: { Key: key(p, "gone") } },
          ],
        },
        ...INDEXES,
      }),
    );
    // a batch that charged the table's indexes: the split beside CapacityUnits
    expect(out.ConsumedCapacity).toEqual([write(5, { GSI1: 2 }, true)]);
  });
});

describe("reads: 4 KB units, eventually consistent at half", () => {
  it("GetItem: the whole item whatever the projection, a missing one 1 unit", async () => {
    const p = ns();
    await put({ ...key(p), ...pad(9_000) });
    const get = (consistent: boolean, k = key(p)) =>
      client
        .send(
          new GetItemCommand({
            TableName: table,
            Key: k,
            ConsistentRead: consistent,
            ProjectionExpression: "PK",
            ...INDEXES,
          }),
        )
        .then((out) => out.ConsumedCapacity);
    expect(await get(true)).toEqual(read(3));
    expect(await get(false)).toEqual(read(1.5));
    expect(await get(true, key(ns()))).toEqual(read(1));
    expect(await get(false, key(ns()))).toEqual(read(0.5));
  });

  it("Query: the items read summed, then rounded up to 4 KB; on a GSI charged to the index", async () => {
    const p = ns();
    // three 3 KB items: 9 KB together, 3 units (each alone would round to 1)
    await Promise.all(["a", "b", "c"].map((sk) => put({ ...key(p, sk), ...pad(2_800), ...inGsi1(p, sk) })));
    const query = (input: Partial<ConstructorParameters<typeof QueryCommand>[0]>) =>
      client
        .send(
          new QueryCommand({
            TableName: table,
            KeyConditionExpression: "PK = :p",
            ExpressionAttributeValues: { ":p": { S: p } },
            ...INDEXES,
            ...input,
          }),
        )
        .then((out) => out.ConsumedCapacity);
    expect(await query({ ConsistentRead: true })).toEqual(read(3));
    expect(await query({})).toEqual(read(1.5));
    // a filter does not reduce what is read
    expect(
      await query({
        ConsistentRead: true,
        FilterExpression: "padding = :none",
        ExpressionAttributeValues: { ":p": { S: p }, ":none": { S: "none" } },
      }),
    ).toEqual(read(3));
    expect(await query({ IndexName: "GSI1", KeyConditionExpression: "GSI1PK = :p" })).toEqual(read(0, { GSI1: 1.5 }));
    // nothing found: still one (half) unit
    expect(await query({ ExpressionAttributeValues: { ":p": { S: ns() } } })).toEqual(read(0.5));
  });

  it("BatchGetItem: each item's units, summed per table", async () => {
    const p = ns();
    await put({ ...key(p, "a"), ...pad(9_000) });
    await put({ ...key(p, "b") });
    const out = await client.send(
      new BatchGetItemCommand({
        RequestItems: { [table]: { Keys: [key(p, "a"), key(p, "b"), key(p, "missing")], ConsistentRead: true } },
        ...INDEXES,
      }),
    );
    expect(out.ConsumedCapacity).toEqual([read(3 + 1 + 1)]);
  });
});

describe("transactions: items at 2x, index entries at 1x", () => {
  it("TransactWriteItems: Put, Update, Delete and ConditionCheck", async () => {
    const p = ns();
    await put({ ...key(p, "upd"), ...pad(2_800), ...inGsi1(p) });
    await put({ ...key(p, "del") });
    await put({ ...key(p, "chk"), ...pad(2_800) });
    const out = await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: table, Item: { ...key(p, "new"), ...inGsi2(p) } } }, // 2 + GSI2 1
          {
            Update: {
              TableName: table,
              Key: key(p, "upd"),
              UpdateExpression: "SET n = :n",
              ExpressionAttributeValues: { ":n": { N: "1" } },
            },
          }, // 6 + GSI1 3
          { Delete: { TableName: table, Key: key(p, "del") } }, // 2
          {
            ConditionCheck: { TableName: table, Key: key(p, "chk"), ConditionExpression: "attribute_exists(PK)" },
          }, // 6, as a write of the item
        ],
        ...INDEXES,
      }),
    );
    // a transaction: always the split
    expect(out.ConsumedCapacity).toEqual([write(2 + 6 + 2 + 6, { GSI1: 3, GSI2: 1 }, true)]);
  });

  it("TransactGetItems: each item in 4 KB units at 2x", async () => {
    const p = ns();
    await put({ ...key(p, "a"), ...pad(9_000) });
    const out = await client.send(
      new TransactGetItemsCommand({
        TransactItems: [
          { Get: { TableName: table, Key: key(p, "a") } },
          { Get: { TableName: table, Key: key(p, "missing") } },
        ],
        ReturnConsumedCapacity: "TOTAL",
      }),
    );
    expect(out.ConsumedCapacity).toEqual([{ TableName: table, CapacityUnits: 8, ReadCapacityUnits: 8 }]);
  });
});
