/**
 * The patched dynalite itself (not a conformance test): every write writes its item and its index
 * entries in ONE LevelDB batch, a transaction writes all its items in one batch, and a batch that
 * fails leaves neither item nor index entry behind. Runs dynalite in this process on a temp LevelDB
 * directory, with spies on abstract-level's put/del/batch (installed before the store is created,
 * since dynalite binds those methods when it opens the database).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type AttributeValue,
  BatchWriteItemCommand,
  CreateTableCommand,
  DeleteItemCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it, type MockInstance, vi } from "vitest";
import { type LocalDynamoDB, startLocalDynamoDB } from "../../src/local/dynamodb.js";
import { createTestDynamoClient } from "../support/dynamo.js";

type Item = Record<string, AttributeValue>;
type BatchOp = { type: "put" | "del"; key: string; value?: unknown };
interface LevelMethods {
  put(...args: unknown[]): unknown;
  del(...args: unknown[]): unknown;
  batch(...args: unknown[]): unknown;
}

// The very `level` dynalite requires (same module instance, through Node's require cache).
const requireFromDynalite = createRequire(createRequire(import.meta.url).resolve("dynalite"));
const { Level } = requireFromDynalite("level") as { Level: { prototype: object } };
const levelProto = Object.getPrototypeOf(Level.prototype) as LevelMethods;

const table = "seats";
const dir = mkdtempSync(join(tmpdir(), "dynalite-batch-"));
let db: LocalDynamoDB;
let client: DynamoDBClient;
let spies: { put: MockInstance; del: MockInstance; batch: MockInstance };

const key = (sk: string): Item => ({ PK: { S: "event-1" }, SK: { S: sk } });

/** The LevelDB writes `action` makes: put/del calls, and the ops of each batch. */
async function writesOf(action: () => Promise<unknown>) {
  vi.clearAllMocks();
  await action();
  return {
    puts: spies.put.mock.calls.length,
    dels: spies.del.mock.calls.length,
    batches: spies.batch.mock.calls.map((call) =>
      (call[0] as BatchOp[]).map((op) => `${op.type} ${op.key.split("~")[0]}`),
    ),
  };
}

/** The table's items and the sparse index's entries, as sort keys. */
async function state() {
  const items = await client.send(new ScanCommand({ TableName: table, ConsistentRead: true }));
  const indexed = await client.send(new ScanCommand({ TableName: table, IndexName: "held" }));
  return {
    items: (items.Items ?? []).map((i) => i.SK?.S).sort(),
    held: (items.Items ?? [])
      .filter((i) => i.heldBy)
      .map((i) => `${i.SK?.S}:${i.heldBy?.S}`)
      .sort(),
    index: (indexed.Items ?? []).map((i) => `${i.SK?.S}:${i.heldBy?.S}`).sort(),
  };
}

beforeAll(async () => {
  spies = {
    put: vi.spyOn(levelProto, "put"),
    del: vi.spyOn(levelProto, "del"),
    batch: vi.spyOn(levelProto, "batch"),
  };
  db = await startLocalDynamoDB({ port: 0, path: dir });
  client = createTestDynamoClient(db.endpoint);
  await client.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "PK", AttributeType: "S" },
        { AttributeName: "SK", AttributeType: "S" },
        { AttributeName: "heldBy", AttributeType: "S" },
      ],
      KeySchema: [
        { AttributeName: "PK", KeyType: "HASH" },
        { AttributeName: "SK", KeyType: "RANGE" },
      ],
      GlobalSecondaryIndexes: [
        {
          IndexName: "held",
          KeySchema: [{ AttributeName: "heldBy", KeyType: "HASH" }],
          Projection: { ProjectionType: "ALL" },
        },
      ],
    }),
  );
  await vi.waitFor(async () => {
    const out = await client.send(new DescribeTableCommand({ TableName: table }));
    if (out.Table?.TableStatus !== "ACTIVE") throw new Error("table not active yet");
  });
});

afterAll(async () => {
  client?.destroy();
  await db?.close();
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

describe("dynalite patch: one atomic LevelDB batch per write", () => {
  it("PutItem writes the item and its index entry in one batch", async () => {
    const writes = await writesOf(() =>
      client.send(new PutItemCommand({ TableName: table, Item: { ...key("s1"), heldBy: { S: "fan-1" } } })),
    );
    expect(writes).toEqual({ puts: 0, dels: 0, batches: [["put index-global", "put item-seats"]] });
    expect(await state()).toEqual({ items: ["s1"], held: ["s1:fan-1"], index: ["s1:fan-1"] });
  });

  it("PutItem without the index attribute writes the item alone", async () => {
    const writes = await writesOf(() => client.send(new PutItemCommand({ TableName: table, Item: key("s2") })));
    expect(writes).toEqual({ puts: 0, dels: 0, batches: [["put item-seats"]] });
    expect(await state()).toEqual({ items: ["s1", "s2"], held: ["s1:fan-1"], index: ["s1:fan-1"] });
  });

  it("UpdateItem that changes the index key moves the entry in the same batch as the item", async () => {
    const writes = await writesOf(() =>
      client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key("s1"),
          UpdateExpression: "SET heldBy = :fan",
          ExpressionAttributeValues: { ":fan": { S: "fan-2" } },
        }),
      ),
    );
    expect(writes).toEqual({ puts: 0, dels: 0, batches: [["del index-global", "put index-global", "put item-seats"]] });
    expect(await state()).toEqual({ items: ["s1", "s2"], held: ["s1:fan-2"], index: ["s1:fan-2"] });
  });

  it("UpdateItem that removes the index attribute drops the entry in the same batch", async () => {
    const writes = await writesOf(() =>
      client.send(new UpdateItemCommand({ TableName: table, Key: key("s1"), UpdateExpression: "REMOVE heldBy" })),
    );
    expect(writes).toEqual({ puts: 0, dels: 0, batches: [["del index-global", "put item-seats"]] });
    expect(await state()).toEqual({ items: ["s1", "s2"], held: [], index: [] });
  });

  it("DeleteItem removes the item and its index entry in one batch", async () => {
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key("s3"), heldBy: { S: "fan-3" } } }));
    const writes = await writesOf(() => client.send(new DeleteItemCommand({ TableName: table, Key: key("s3") })));
    expect(writes).toEqual({ puts: 0, dels: 0, batches: [["del index-global", "del item-seats"]] });
    expect(await state()).toEqual({ items: ["s1", "s2"], held: [], index: [] });
  });

  it("a failed conditional write writes nothing", async () => {
    const writes = await writesOf(() =>
      client
        .send(
          new PutItemCommand({ TableName: table, Item: key("s1"), ConditionExpression: "attribute_not_exists(PK)" }),
        )
        .catch((err: Error) => expect(err.name).toBe("ConditionalCheckFailedException")),
    );
    expect(writes).toEqual({ puts: 0, dels: 0, batches: [] });
  });

  it("TransactWriteItems writes all its items and index entries in one batch", async () => {
    const writes = await writesOf(() =>
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: table, Item: { ...key("s4"), heldBy: { S: "fan-4" } } } },
            {
              Update: {
                TableName: table,
                Key: key("s2"),
                UpdateExpression: "SET heldBy = :fan",
                ExpressionAttributeValues: { ":fan": { S: "fan-4" } },
              },
            },
            { Delete: { TableName: table, Key: key("s1") } },
            { ConditionCheck: { TableName: table, Key: key("s9"), ConditionExpression: "attribute_not_exists(PK)" } },
          ],
        }),
      ),
    );
    expect(writes.puts).toBe(0);
    expect(writes.dels).toBe(0);
    expect(writes.batches).toHaveLength(1);
    expect(writes.batches[0]?.slice().sort()).toEqual(
      ["put index-global", "put item-seats", "put index-global", "put item-seats", "del item-seats"].sort(),
    );
    expect(await state()).toEqual({
      items: ["s2", "s4"],
      held: ["s2:fan-4", "s4:fan-4"],
      index: ["s2:fan-4", "s4:fan-4"],
    });
  });

  it("a cancelled transaction writes nothing", async () => {
    const writes = await writesOf(() =>
      client
        .send(
          new TransactWriteItemsCommand({
            TransactItems: [
              { Delete: { TableName: table, Key: key("s4") } },
              { ConditionCheck: { TableName: table, Key: key("s2"), ConditionExpression: "attribute_not_exists(PK)" } },
            ],
          }),
        )
        .catch((err: Error) => expect(err.name).toBe("TransactionCanceledException")),
    );
    expect(writes).toEqual({ puts: 0, dels: 0, batches: [] });
    expect(await state()).toEqual({
      items: ["s2", "s4"],
      held: ["s2:fan-4", "s4:fan-4"],
      index: ["s2:fan-4", "s4:fan-4"],
    });
  });

  it("BatchWriteItem writes each item with its index entry in one batch", async () => {
    const writes = await writesOf(() =>
      client.send(
        new BatchWriteItemCommand({
          RequestItems: {
            [table]: [
              { PutRequest: { Item: { ...key("s5"), heldBy: { S: "fan-5" } } } },
              { PutRequest: { Item: key("s6") } },
              { DeleteRequest: { Key: key("s4") } },
            ],
          },
        }),
      ),
    );
    expect(writes.puts).toBe(0);
    expect(writes.dels).toBe(0);
    expect(writes.batches.map((ops) => ops.join(",")).sort()).toEqual(
      ["put index-global,put item-seats", "put item-seats", "del index-global,del item-seats"].sort(),
    );
    expect(await state()).toEqual({
      items: ["s2", "s5", "s6"],
      held: ["s2:fan-4", "s5:fan-5"],
      index: ["s2:fan-4", "s5:fan-5"],
    });
  });

  it("a batch that fails leaves neither item nor index entry, answers 500, and releases the item lock", async () => {
    spies.batch.mockImplementationOnce(() => Promise.reject(new Error("injected LevelDB failure")));
    const err = await client
      .send(new PutItemCommand({ TableName: table, Item: { ...key("s7"), heldBy: { S: "fan-7" } } }))
      .then(
        () => null,
        (e: Error & { $metadata?: { httpStatusCode?: number } }) => e,
      );
    expect(err?.name).toBe("InternalServerError");
    expect(err?.$metadata?.httpStatusCode).toBe(500);
    expect((await client.send(new GetItemCommand({ TableName: table, Key: key("s7") }))).Item).toBeUndefined();
    expect((await state()).index).not.toContain("s7:fan-7");

    // The same item is writable right away: the failed write released its lock.
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key("s7"), heldBy: { S: "fan-7" } } }));
    expect(await state()).toEqual({
      items: ["s2", "s5", "s6", "s7"],
      held: ["s2:fan-4", "s5:fan-5", "s7:fan-7"],
      index: ["s2:fan-4", "s5:fan-5", "s7:fan-7"],
    });
  });

  it("a transaction whose batch fails leaves every item as it was and releases every lock", async () => {
    const before = await state();
    spies.batch.mockImplementationOnce(() => Promise.reject(new Error("injected LevelDB failure")));
    const err = await client
      .send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Delete: { TableName: table, Key: key("s2") } },
            { Put: { TableName: table, Item: { ...key("s8"), heldBy: { S: "fan-8" } } } },
          ],
        }),
      )
      .then(
        () => null,
        (e: Error) => e,
      );
    expect(err?.name).toBe("InternalServerError");
    expect(await state()).toEqual(before);

    await client.send(
      new DeleteItemCommand({ TableName: table, Key: key("s2"), ConditionExpression: "attribute_exists(PK)" }),
    );
    await client.send(
      new PutItemCommand({ TableName: table, Item: key("s8"), ConditionExpression: "attribute_not_exists(PK)" }),
    );
  });
});
