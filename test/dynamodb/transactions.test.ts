/**
 * DynamoDB conformance: TransactWriteItems, TransactGetItems and ReturnValuesOnConditionCheckFailure.
 * Runs against whatever endpoint the global setup provides (the patched dynalite by default), so it
 * asserts only what real DynamoDB does.
 */
import { randomUUID } from "node:crypto";
import {
  type AttributeValue,
  DeleteItemCommand,
  DeleteTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type TransactWriteItem,
  TransactGetItemsCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createKeyValueTable, createTestDynamoClient } from "../support/dynamo.js";

type Item = Record<string, AttributeValue>;
type SdkError = Error & {
  Item?: Item;
  CancellationReasons?: { Code?: string; Message?: string; Item?: Item }[];
};

const table = `conf-tx-${Date.now().toString(36)}-${randomUUID().slice(0, 8)}`;
let client: DynamoDBClient;

const key = (pk: string, sk = "A"): Item => ({ PK: { S: pk }, SK: { S: sk } });
/** A fresh partition per test, so tests never see each other's items. */
const ns = () => randomUUID();

async function rejection(promise: Promise<unknown>): Promise<SdkError> {
  try {
    await promise;
  } catch (err) {
    return err as SdkError;
  }
  throw new Error("expected the request to be rejected, but it succeeded");
}

async function get(k: Item): Promise<Item | undefined> {
  const out = await client.send(new GetItemCommand({ TableName: table, Key: k, ConsistentRead: true }));
  return out.Item;
}

async function put(item: Item): Promise<void> {
  await client.send(new PutItemCommand({ TableName: table, Item: item }));
}

beforeAll(async () => {
  client = createTestDynamoClient(inject("dynamoEndpoint"));
  await createKeyValueTable(client, table);
});

afterAll(async () => {
  await client?.send(new DeleteTableCommand({ TableName: table }));
  client?.destroy();
});

describe("TransactWriteItems", () => {
  it("applies Put, Update, Delete and ConditionCheck together", async () => {
    const p = ns();
    await put({ ...key(p, "upd"), n: { N: "1" } });
    await put({ ...key(p, "del"), n: { N: "1" } });
    await put({ ...key(p, "chk"), status: { S: "open" } });

    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          {
            Put: {
              TableName: table,
              Item: { ...key(p, "new"), n: { N: "7" } },
              ConditionExpression: "attribute_not_exists(PK)",
            },
          },
          {
            Update: {
              TableName: table,
              Key: key(p, "upd"),
              UpdateExpression: "SET n = n + :one, holder = :h",
              ConditionExpression: "attribute_exists(PK)",
              ExpressionAttributeValues: { ":one": { N: "1" }, ":h": { S: "fan-1" } },
            },
          },
          {
            Delete: {
              TableName: table,
              Key: key(p, "del"),
              ConditionExpression: "n = :one",
              ExpressionAttributeValues: { ":one": { N: "1" } },
            },
          },
          {
            ConditionCheck: {
              TableName: table,
              Key: key(p, "chk"),
              ConditionExpression: "#s = :open",
              ExpressionAttributeNames: { "#s": "status" },
              ExpressionAttributeValues: { ":open": { S: "open" } },
            },
          },
        ],
      }),
    );

    expect(await get(key(p, "new"))).toEqual({ ...key(p, "new"), n: { N: "7" } });
    expect(await get(key(p, "upd"))).toEqual({ ...key(p, "upd"), n: { N: "2" }, holder: { S: "fan-1" } });
    expect(await get(key(p, "del"))).toBeUndefined();
    expect(await get(key(p, "chk"))).toEqual({ ...key(p, "chk"), status: { S: "open" } });
  });

  it("cancels everything when one condition fails, with one reason per action in request order", async () => {
    const p = ns();
    await put({ ...key(p, "upd"), n: { N: "1" } });
    await put({ ...key(p, "del"), n: { N: "1" } });
    await put({ ...key(p, "held"), holder: { S: "someone" } });

    const items: TransactWriteItem[] = [
      {
        Put: {
          TableName: table,
          Item: { ...key(p, "new"), n: { N: "1" } },
          ConditionExpression: "attribute_not_exists(PK)",
        },
      },
      {
        Update: {
          TableName: table,
          Key: key(p, "upd"),
          UpdateExpression: "SET n = n + :one",
          ExpressionAttributeValues: { ":one": { N: "1" } },
        },
      },
      {
        ConditionCheck: {
          TableName: table,
          Key: key(p, "held"),
          ConditionExpression: "attribute_not_exists(holder)",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
      },
      { Delete: { TableName: table, Key: key(p, "del") } },
    ];
    const err = await rejection(client.send(new TransactWriteItemsCommand({ TransactItems: items })));

    expect(err.name).toBe("TransactionCanceledException");
    expect(err.message).toContain("[None, None, ConditionalCheckFailed, None]");
    expect(err.CancellationReasons?.map((r) => r.Code)).toEqual(["None", "None", "ConditionalCheckFailed", "None"]);
    expect(err.CancellationReasons?.[2]?.Message).toBe("The conditional request failed");
    expect(err.CancellationReasons?.[2]?.Item).toEqual({ ...key(p, "held"), holder: { S: "someone" } });
    expect(err.CancellationReasons?.[0]?.Item).toBeUndefined();

    // Nothing changed.
    expect(await get(key(p, "new"))).toBeUndefined();
    expect(await get(key(p, "upd"))).toEqual({ ...key(p, "upd"), n: { N: "1" } });
    expect(await get(key(p, "del"))).toEqual({ ...key(p, "del"), n: { N: "1" } });

    // And every item is writable at once: a plain conditional write on each succeeds right away.
    await client.send(
      new PutItemCommand({ TableName: table, Item: key(p, "new"), ConditionExpression: "attribute_not_exists(PK)" }),
    );
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key(p, "upd"),
        UpdateExpression: "SET n = :two",
        ConditionExpression: "n = :one",
        ExpressionAttributeValues: { ":one": { N: "1" }, ":two": { N: "2" } },
      }),
    );
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key(p, "held"),
        UpdateExpression: "REMOVE holder",
        ConditionExpression: "attribute_exists(holder)",
      }),
    );
    await client.send(
      new DeleteItemCommand({ TableName: table, Key: key(p, "del"), ConditionExpression: "attribute_exists(PK)" }),
    );
    expect(await get(key(p, "upd"))).toEqual({ ...key(p, "upd"), n: { N: "2" } });
    expect(await get(key(p, "held"))).toEqual(key(p, "held"));
  });

  it("leaves Item out of a cancellation reason when ALL_OLD was not asked or the item did not exist", async () => {
    const p = ns();
    await put({ ...key(p, "a"), v: { S: "x" } });
    const err = await rejection(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { ConditionCheck: { TableName: table, Key: key(p, "a"), ConditionExpression: "attribute_not_exists(PK)" } },
            {
              ConditionCheck: {
                TableName: table,
                Key: key(p, "missing"),
                ConditionExpression: "attribute_exists(PK)",
                ReturnValuesOnConditionCheckFailure: "ALL_OLD",
              },
            },
          ],
        }),
      ),
    );
    expect(err.name).toBe("TransactionCanceledException");
    expect(err.CancellationReasons?.map((r) => r.Code)).toEqual(["ConditionalCheckFailed", "ConditionalCheckFailed"]);
    expect(err.CancellationReasons?.[0]?.Item).toBeUndefined();
    expect(err.CancellationReasons?.[1]?.Item).toBeUndefined();
  });

  it("rejects two actions on one item with a ValidationException and applies none", async () => {
    const p = ns();
    const err = await rejection(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: table, Item: { ...key(p, "x"), v: { S: "1" } } } },
            {
              Update: {
                TableName: table,
                Key: key(p, "x"),
                UpdateExpression: "SET v = :v",
                ExpressionAttributeValues: { ":v": { S: "2" } },
              },
            },
          ],
        }),
      ),
    );
    expect(err.name).toBe("ValidationException");
    expect(err.message).toMatch(/multiple operations on one item/);
    expect(await get(key(p, "x"))).toBeUndefined();
  });

  it("treats a repeated ClientRequestToken as the same transaction, and a changed request as a mismatch", async () => {
    const p = ns();
    await put({ ...key(p, "counter"), n: { N: "0" } });
    const token = randomUUID();
    const increment = (by: string) =>
      new TransactWriteItemsCommand({
        ClientRequestToken: token,
        TransactItems: [
          {
            Update: {
              TableName: table,
              Key: key(p, "counter"),
              UpdateExpression: "SET n = n + :by",
              ExpressionAttributeValues: { ":by": { N: by } },
            },
          },
        ],
      });

    await client.send(increment("1"));
    await client.send(increment("1"));
    expect(await get(key(p, "counter"))).toEqual({ ...key(p, "counter"), n: { N: "1" } });

    const err = await rejection(client.send(increment("5")));
    expect(err.name).toBe("IdempotentParameterMismatchException");
    expect(await get(key(p, "counter"))).toEqual({ ...key(p, "counter"), n: { N: "1" } });
  });
});

describe("TransactGetItems", () => {
  it("returns the items in request order, an empty response for a missing item, with projections", async () => {
    const p = ns();
    await put({ ...key(p, "a"), v: { S: "1" }, extra: { S: "big" } });
    await put({ ...key(p, "b"), v: { S: "2" } });

    const out = await client.send(
      new TransactGetItemsCommand({
        TransactItems: [
          { Get: { TableName: table, Key: key(p, "b") } },
          { Get: { TableName: table, Key: key(p, "missing") } },
          {
            Get: {
              TableName: table,
              Key: key(p, "a"),
              ProjectionExpression: "#v",
              ExpressionAttributeNames: { "#v": "v" },
            },
          },
        ],
      }),
    );
    expect(out.Responses).toHaveLength(3);
    expect(out.Responses?.[0]?.Item).toEqual({ ...key(p, "b"), v: { S: "2" } });
    expect(out.Responses?.[1]?.Item).toBeUndefined();
    expect(out.Responses?.[2]?.Item).toEqual({ v: { S: "1" } });
  });
});

describe("ReturnValuesOnConditionCheckFailure: ALL_OLD", () => {
  it("puts the old item on the ConditionalCheckFailedException of PutItem, UpdateItem and DeleteItem", async () => {
    const p = ns();
    const old = { ...key(p, "seat"), holder: { S: "fan-1" }, n: { N: "3" } };
    await put(old);

    const putErr = await rejection(
      client.send(
        new PutItemCommand({
          TableName: table,
          Item: { ...key(p, "seat"), holder: { S: "fan-2" } },
          ConditionExpression: "attribute_not_exists(holder)",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      ),
    );
    expect(putErr.name).toBe("ConditionalCheckFailedException");
    expect(putErr.Item).toEqual(old);

    const updateErr = await rejection(
      client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key(p, "seat"),
          UpdateExpression: "SET holder = :h",
          ConditionExpression: "attribute_not_exists(holder) OR holder = :h",
          ExpressionAttributeValues: { ":h": { S: "fan-2" } },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      ),
    );
    expect(updateErr.name).toBe("ConditionalCheckFailedException");
    expect(updateErr.Item).toEqual(old);

    const deleteErr = await rejection(
      client.send(
        new DeleteItemCommand({
          TableName: table,
          Key: key(p, "seat"),
          ConditionExpression: "holder = :h",
          ExpressionAttributeValues: { ":h": { S: "fan-2" } },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      ),
    );
    expect(deleteErr.name).toBe("ConditionalCheckFailedException");
    expect(deleteErr.Item).toEqual(old);

    expect(await get(key(p, "seat"))).toEqual(old);
  });

  it("carries no Item with NONE, nor when the item does not exist", async () => {
    const p = ns();
    await put({ ...key(p, "seat"), holder: { S: "fan-1" } });
    const none = await rejection(
      client.send(
        new PutItemCommand({
          TableName: table,
          Item: key(p, "seat"),
          ConditionExpression: "attribute_not_exists(PK)",
          ReturnValuesOnConditionCheckFailure: "NONE",
        }),
      ),
    );
    expect(none.name).toBe("ConditionalCheckFailedException");
    expect(none.Item).toBeUndefined();

    const missing = await rejection(
      client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key(p, "nobody"),
          UpdateExpression: "SET holder = :h",
          ConditionExpression: "attribute_exists(PK)",
          ExpressionAttributeValues: { ":h": { S: "fan-2" } },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      ),
    );
    expect(missing.name).toBe("ConditionalCheckFailedException");
    expect(missing.Item).toBeUndefined();
    expect(await get(key(p, "nobody"))).toBeUndefined();
  });
});
