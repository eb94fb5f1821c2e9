/**
 * DynamoDB conformance under contention: conditional writes and transactions fired concurrently
 * (Promise.all over a client with hundreds of sockets, so the requests are truly in flight together).
 * Real DynamoDB may cancel a transaction with TransactionConflict instead of queueing it; the
 * assertions allow that and still demand that exactly one writer wins and losers change nothing.
 */
import { randomUUID } from "node:crypto";
import { Agent } from "node:http";
import {
  type AttributeValue,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createKeyValueTable } from "../support/dynamo.js";
import { isLoopbackEndpoint } from "../../src/dynamodb/client.js";

type Item = Record<string, AttributeValue>;
type SdkError = Error & { CancellationReasons?: { Code?: string }[] };

const table = `conf-conc-${Date.now().toString(36)}-${randomUUID().slice(0, 8)}`;
let client: DynamoDBClient;

const key = (pk: string, sk = "A"): Item => ({ PK: { S: pk }, SK: { S: sk } });

/**
 * 512 keep-alive sockets (all kept between rounds), so hundreds of requests are in flight at once.
 * The SDK counts the time a request queues in the agent for a free socket against its
 * connectionTimeout, so with 1,000 requests on 512 sockets the timeouts must be generous.
 */
function contentionClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: "us-east-1",
    ...(isLoopbackEndpoint(endpoint) ? { credentials: { accessKeyId: "local", secretAccessKey: "local" } } : {}),
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler({
      httpAgent: new Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 512 }),
      connectionTimeout: 30_000,
      requestTimeout: 30_000,
    }),
  });
}

beforeAll(async () => {
  client = contentionClient(inject("dynamoEndpoint"));
  await createKeyValueTable(client, table);
});

afterAll(async () => {
  await client?.send(new DeleteTableCommand({ TableName: table }));
  client?.destroy();
});

async function get(k: Item): Promise<Item | undefined> {
  return (await client.send(new GetItemCommand({ TableName: table, Key: k, ConsistentRead: true }))).Item;
}

/** Fails with a clear message instead of hanging until the test timeout (a deadlock, say). */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not complete within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

const errorName = (r: PromiseSettledResult<unknown>) =>
  r.status === "rejected" ? (r.reason as SdkError).name : "fulfilled";

/** Deterministic shuffles, so a failure can be replayed. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe("contention", () => {
  it("1,000 concurrent conditional UpdateItems on one item: exactly one wins, 20 rounds", async () => {
    const run = randomUUID();
    for (let round = 0; round < 20; round++) {
      const seat = key(`seat#${run}`, `r${round}`);
      await client.send(new PutItemCommand({ TableName: table, Item: { ...seat, status: { S: "available" } } }));

      const results = await within(
        30_000,
        `round ${round}`,
        Promise.allSettled(
          Array.from({ length: 1_000 }, (_, fan) =>
            client.send(
              new UpdateItemCommand({
                TableName: table,
                Key: seat,
                UpdateExpression: "SET holder = :fan, #s = :held",
                ConditionExpression: "attribute_not_exists(holder) OR #s = :available",
                ExpressionAttributeNames: { "#s": "status" },
                ExpressionAttributeValues: {
                  ":fan": { S: `fan-${fan}` },
                  ":held": { S: "held" },
                  ":available": { S: "available" },
                },
              }),
            ),
          ),
        ),
      );

      const winners = results.flatMap((r, fan) => (r.status === "fulfilled" ? [fan] : []));
      const losers = results.filter((r) => r.status === "rejected").map(errorName);
      expect(winners, `round ${round}`).toHaveLength(1);
      expect(new Set(losers), `round ${round}`).toEqual(new Set(["ConditionalCheckFailedException"]));
      expect(await get(seat), `round ${round}`).toEqual({
        ...seat,
        status: { S: "held" },
        holder: { S: `fan-${winners[0]}` },
      });
    }
  }, 180_000); // ~1 s a round alone on 2 cores; generous for a loaded CI machine

  it("200 concurrent two-item transactions on one shared item: exactly one wins, losers change nothing", async () => {
    const run = randomUUID();
    const shared = key(`shared#${run}`);
    await client.send(new PutItemCommand({ TableName: table, Item: { ...shared, status: { S: "available" } } }));

    const transaction = (fan: number): TransactWriteItem[] => [
      {
        Update: {
          TableName: table,
          Key: shared,
          UpdateExpression: "SET holder = :fan",
          ConditionExpression: "attribute_not_exists(holder)",
          ExpressionAttributeValues: { ":fan": { S: `fan-${fan}` } },
        },
      },
      {
        Put: {
          TableName: table,
          Item: { ...key(`own#${run}`, `fan-${fan}`), fan: { N: String(fan) } },
          ConditionExpression: "attribute_not_exists(PK)",
        },
      },
    ];

    // Real DynamoDB cancels some transactions with TransactionConflict rather than queueing them;
    // those are retried until each transaction has either committed or lost on its condition.
    let pending = Array.from({ length: 200 }, (_, fan) => fan);
    const committed: number[] = [];
    for (let attempt = 0; pending.length > 0; attempt++) {
      expect(attempt, "transactions still conflicting after 20 attempts").toBeLessThan(20);
      const results = await within(
        30_000,
        "200 transactions",
        Promise.allSettled(
          pending.map((fan) => client.send(new TransactWriteItemsCommand({ TransactItems: transaction(fan) }))),
        ),
      );
      const retry: number[] = [];
      results.forEach((r, i) => {
        const fan = pending[i]!;
        if (r.status === "fulfilled") {
          committed.push(fan);
          return;
        }
        const err = r.reason as SdkError;
        expect(err.name).toBe("TransactionCanceledException");
        const codes = err.CancellationReasons?.map((c) => c.Code) ?? [];
        expect(codes).toHaveLength(2);
        if (codes[0] === "ConditionalCheckFailed") {
          expect(codes[1]).toBe("None");
        } else {
          expect(codes).toContain("TransactionConflict");
          retry.push(fan);
        }
      });
      pending = retry;
    }

    expect(committed).toHaveLength(1);
    expect(await get(shared)).toEqual({ ...shared, status: { S: "available" }, holder: { S: `fan-${committed[0]}` } });
    const own = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: "PK = :pk",
        ExpressionAttributeValues: { ":pk": { S: `own#${run}` } },
        ConsistentRead: true,
      }),
    );
    expect(own.Items).toEqual([{ ...key(`own#${run}`, `fan-${committed[0]}`), fan: { N: String(committed[0]) } }]);
  });

  it("overlapping transactions in different orders, with single-item writes between, never deadlock", async () => {
    const run = randomUUID();
    const itemCount = 8;
    const items = Array.from({ length: itemCount }, (_, i) => key(`ov#${run}`, `i${i}`));
    const gate = key(`ov#${run}`, "gate");
    for (const k of [...items, gate]) {
      await client.send(new PutItemCommand({ TableName: table, Item: { ...k, n: { N: "0" }, singles: { N: "0" } } }));
    }

    const random = prng(42);
    const txCount = 80;
    // Each transaction increments 3 distinct items, listed in a random order. Every fourth one
    // also checks a condition that is false, so it must be cancelled whole.
    const txs = Array.from({ length: txCount }, (_, t) => {
      const picked = [...items.keys()].sort(() => random() - 0.5).slice(0, 3);
      const actions: TransactWriteItem[] = picked.map((i) => ({
        Update: {
          TableName: table,
          Key: items[i]!,
          UpdateExpression: "SET n = n + :one",
          ConditionExpression: "attribute_exists(PK)",
          ExpressionAttributeValues: { ":one": { N: "1" } },
        },
      }));
      const doomed = t % 4 === 3;
      if (doomed) {
        actions.splice(Math.floor(random() * 4), 0, {
          ConditionCheck: {
            TableName: table,
            Key: gate,
            ConditionExpression: "n < :zero",
            ExpressionAttributeValues: { ":zero": { N: "0" } },
          },
        });
      }
      return { actions, doomed };
    });
    const singles = Array.from({ length: 80 }, () => items[Math.floor(random() * itemCount)]!);

    const work: Promise<unknown>[] = [];
    for (let i = 0; i < txCount; i++) {
      work.push(client.send(new TransactWriteItemsCommand({ TransactItems: txs[i]!.actions })));
      work.push(
        client.send(
          new UpdateItemCommand({
            TableName: table,
            Key: singles[i]!,
            UpdateExpression: "SET singles = singles + :one",
            ExpressionAttributeValues: { ":one": { N: "1" } },
          }),
        ),
      );
    }
    const results = await within(30_000, "overlapping transactions", Promise.allSettled(work));

    let committed = 0;
    let touched = 0;
    results.forEach((r, i) => {
      if (i % 2 === 0) {
        const { doomed } = txs[i / 2]!;
        if (r.status === "fulfilled") {
          expect(doomed).toBe(false);
          committed++;
        } else {
          expect(errorName(r)).toBe("TransactionCanceledException");
        }
      } else if (r.status === "fulfilled") {
        touched++;
      } else {
        // Real DynamoDB rejects a write to an item a transaction is writing at that moment.
        expect(errorName(r)).toBe("TransactionConflictException");
      }
    });

    expect(committed).toBeGreaterThan(0);
    expect(touched).toBeGreaterThan(0);
    const after = await Promise.all(items.map((k) => get(k)));
    const sum = (attr: string) => after.reduce((total, item) => total + Number(item?.[attr]?.N), 0);
    // Atomicity: every committed transaction added exactly 3, every cancelled one nothing.
    expect(sum("n")).toBe(3 * committed);
    expect(sum("singles")).toBe(touched);
    expect((await get(gate))?.n).toEqual({ N: "0" });
  });
});
