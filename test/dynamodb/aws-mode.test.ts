/**
 * The local DynamoDB's aws mode (docs/local-dynamodb.md): transactions conflict instead of queueing,
 * single writes to an item in an in-flight transaction fail with TransactionConflictException, and
 * every partition (table or index, partition key value) throttles past 1,000 write and 3,000 read
 * units/s. Each server is started here, in a child process of its own (spawnLocalDynamoDB, so
 * the option flags are exercised too), and hit with many requests in flight at once.
 *
 * transactionMs keeps a transaction in flight long enough for the test to act while it is: the
 * test waits until the server's report says so (inFlight), never a guessed sleep.
 */
import { randomUUID } from "node:crypto";
import {
  type AttributeValue,
  BatchWriteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactGetItemsCommand,
  TransactWriteItemsCommand,
  TransactionConflictException,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { type SpawnedDynamoDB, spawnLocalDynamoDB } from "../../src/local/dynamodb.js";
import {
  fetchLocalDynamoReport,
  formatPartitionReport,
  type LocalDynamoReport,
  type PartitionReport,
} from "../../src/local/dynamodb-report.js";

type Item = Record<string, AttributeValue>;
type SdkError = Error & {
  CancellationReasons?: { Code?: string; Message?: string }[];
  $metadata?: { httpStatusCode?: number; attempts?: number };
};

const table = "aws-mode";
const TRANSACTION_MS = 1_500;

const key = (pk: string, sk = "A"): Item => ({ PK: { S: pk }, SK: { S: sk } });
const padding = (bytes: number): Item => ({ padding: { S: "x".repeat(bytes) } });
const ns = () => randomUUID();

interface Server {
  db: SpawnedDynamoDB;
  /** One attempt: every error as the server answers it. */
  client: DynamoDBClient;
}

async function server(options: Parameters<typeof spawnLocalDynamoDB>[0]): Promise<Server> {
  const db = await spawnLocalDynamoDB({ startTimeoutMs: 60_000, ...options });
  const client = makeClient(db.endpoint, 1);
  await ensureTable(client, table);
  return { db, client };
}

function makeClient(endpoint: string, maxAttempts: number): DynamoDBClient {
  return createDynamoClient({ endpoint, region: "us-east-1", maxSockets: 512, maxAttempts, requestTimeoutMs: 60_000 });
}

let conflicting: Server; // aws mode, transactions in flight TRANSACTION_MS
let queueing: Server; // default mode, transactions in flight TRANSACTION_MS
let throttling: Server; // aws mode, default limits, no delay
let scarce: Server; // aws mode, a tenth of the limits

beforeAll(async () => {
  [conflicting, queueing, throttling, scarce] = await Promise.all([
    server({ port: 0, mode: "aws", transactionMs: TRANSACTION_MS }),
    server({ port: 0, mode: "default", transactionMs: TRANSACTION_MS }),
    server({ port: 0, mode: "aws" }),
    server({ port: 0, mode: "aws", partitionWcu: 100, partitionRcu: 300 }),
  ]);
}, 120_000);

afterAll(async () => {
  for (const s of [conflicting, queueing, throttling, scarce]) {
    s?.client.destroy();
    await s?.db.close();
  }
});

async function settle<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return (await Promise.allSettled([promise]))[0]!;
}

const reasonOf = (r: PromiseSettledResult<unknown>) => (r.status === "rejected" ? (r.reason as SdkError) : undefined);

async function get(s: Server, k: Item): Promise<Item | undefined> {
  return (await s.client.send(new GetItemCommand({ TableName: table, Key: k, ConsistentRead: true }))).Item;
}

function txPut(items: Item[]) {
  return new TransactWriteItemsCommand({ TransactItems: items.map((Item) => ({ Put: { TableName: table, Item } })) });
}

/** Resolves once the server has `n` items in flight in TransactWriteItems. */
async function untilInFlight(s: Server, n: number): Promise<void> {
  await vi.waitFor(
    async () => {
      const report = await fetchLocalDynamoReport(s.db.endpoint);
      if (report.inFlight.transactionItems < n) throw new Error(`${report.inFlight.transactionItems} items in flight`);
    },
    { timeout: 30_000, interval: 20 },
  );
}

function partition(report: LocalDynamoReport, pk: string, index: string | null = null): PartitionReport | undefined {
  return report.partitions.find((p) => p.table === table && p.index === index && p.partitionKey === pk);
}

describe("TransactionConflict", () => {
  it("of many transactions on one item in flight at once, exactly one commits; the others are cancelled, nothing of them applied", async () => {
    const p = ns();
    const shared = key(p, "shared");
    const n = 10;
    const results = await Promise.allSettled(
      Array.from({ length: n }, (_, i) =>
        conflicting.client.send(txPut([{ ...key(p, `own-${i}`) }, { ...shared, by: { N: String(i) } }])),
      ),
    );
    const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
    expect(winners).toHaveLength(1);
    for (const [i, r] of results.entries()) {
      if (i === winners[0]) continue;
      const err = reasonOf(r)!;
      expect(err.name).toBe("TransactionCanceledException");
      expect(err.CancellationReasons).toEqual([
        { Code: "None" },
        { Code: "TransactionConflict", Message: "Transaction is ongoing for the item" },
      ]);
    }
    const stored = await Promise.all(Array.from({ length: n }, (_, i) => get(conflicting, key(p, `own-${i}`))));
    expect(stored.flatMap((item, i) => (item ? [i] : []))).toEqual(winners);
    expect((await get(conflicting, shared))?.by).toEqual({ N: String(winners[0]) });
    const report = await fetchLocalDynamoReport(conflicting.db.endpoint);
    expect(partition(report, p)?.conflicts).toBe(n - 1);
  });

  it("with the mode off the same transactions queue and all commit", async () => {
    const p = ns();
    const shared = key(p, "shared");
    const n = 3;
    const results = await Promise.allSettled(
      Array.from({ length: n }, (_, i) =>
        queueing.client.send(txPut([{ ...key(p, `own-${i}`) }, { ...shared, by: { N: String(i) } }])),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(n).fill("fulfilled"));
    const stored = await Promise.all(Array.from({ length: n }, (_, i) => get(queueing, key(p, `own-${i}`))));
    expect(stored.every(Boolean)).toBe(true);
  });

  it("a single write to an item in an in-flight transaction fails with TransactionConflictException; to another item it is fine", async () => {
    const p = ns();
    const tx = conflicting.client.send(txPut([{ ...key(p, "held") }, { ...key(p, "other-held") }]));
    await untilInFlight(conflicting, 2);
    const [onItem, onOther, batch] = await Promise.all([
      settle(
        conflicting.client.send(
          new UpdateItemCommand({
            TableName: table,
            Key: key(p, "held"),
            UpdateExpression: "SET n = :n",
            ExpressionAttributeValues: { ":n": { N: "1" } },
          }),
        ),
      ),
      settle(conflicting.client.send(new PutItemCommand({ TableName: table, Item: key(p, "free") }))),
      settle(
        conflicting.client.send(
          new BatchWriteItemCommand({ RequestItems: { [table]: [{ PutRequest: { Item: key(p, "other-held") } }] } }),
        ),
      ),
    ]);
    await tx;
    const err = reasonOf(onItem)!;
    expect(err).toBeInstanceOf(TransactionConflictException);
    expect(err.name).toBe("TransactionConflictException");
    expect(err.message).toBe("Transaction is ongoing for the item");
    expect(err.$metadata?.httpStatusCode).toBe(400);
    expect(onOther.status).toBe("fulfilled");
    expect(reasonOf(batch)?.name).toBe("TransactionConflictException");
    // the transaction over, the same write goes through
    await conflicting.client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key(p, "held"),
        UpdateExpression: "SET n = :n",
        ExpressionAttributeValues: { ":n": { N: "1" } },
      }),
    );
    expect((await get(conflicting, key(p, "held")))?.n).toEqual({ N: "1" });
  });

  it("a TransactGetItems overlapping an in-flight write is cancelled with TransactionConflict on that item", async () => {
    const p = ns();
    const tx = conflicting.client.send(txPut([{ ...key(p, "written"), v: { S: "new" } }]));
    await untilInFlight(conflicting, 1);
    const [overlapping, apart] = await Promise.all([
      settle(
        conflicting.client.send(
          new TransactGetItemsCommand({
            TransactItems: [
              { Get: { TableName: table, Key: key(p, "apart") } },
              { Get: { TableName: table, Key: key(p, "written") } },
            ],
          }),
        ),
      ),
      settle(
        conflicting.client.send(
          new TransactGetItemsCommand({ TransactItems: [{ Get: { TableName: table, Key: key(p, "apart") } }] }),
        ),
      ),
    ]);
    await tx;
    const err = reasonOf(overlapping)!;
    expect(err.name).toBe("TransactionCanceledException");
    expect(err.CancellationReasons).toEqual([
      { Code: "None" },
      { Code: "TransactionConflict", Message: "Transaction is ongoing for the item" },
    ]);
    expect(apart.status).toBe("fulfilled");
  });
});

describe("per-partition throughput", () => {
  // an item of ~100 KB: 100 write units, 25 read units
  const item100 = (pk: string, sk: string): Item => ({ ...key(pk, sk), ...padding(102_000) });

  it("concurrent writes past 1,000 units/s on one partition are throttled; the SDK's retries get them through", async () => {
    const p = ns();
    // 30 writes of 100 units at once: 3,000 units against a bucket of 1,000 refilled at 1,000/s
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) =>
        throttling.client.send(new PutItemCommand({ TableName: table, Item: item100(p, `s${i}`) })),
      ),
    );
    const failures = results.flatMap((r) => (r.status === "rejected" ? [r.reason as SdkError] : []));
    expect(failures.length).toBeGreaterThan(0);
    expect(new Set(failures.map((e) => e.name))).toEqual(new Set(["ProvisionedThroughputExceededException"]));
    expect(failures[0]!.$metadata?.httpStatusCode).toBe(400);
    const succeeded = results.length - failures.length;
    const report = await fetchLocalDynamoReport(throttling.db.endpoint);
    expect(report.limits).toEqual({ writeUnitsPerSecond: 1_000, readUnitsPerSecond: 3_000 });
    const row = partition(report, p)!;
    expect(row.writeUnits).toBe(succeeded * 100);
    expect(row.throttledRequests).toBe(failures.length);
    // a bucket holds 1 s of units and refills during the second: never more than twice the limit
    expect(row.peakWriteUnitsPerSecond).toBeLessThanOrEqual(2 * 1_000);

    // the SDK's standard retry strategy (backoff on throttling) gets every write through
    const retrying = makeClient(throttling.db.endpoint, 10);
    const q = ns();
    try {
      await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          retrying.send(new PutItemCommand({ TableName: table, Item: item100(q, `s${i}`) })),
        ),
      );
    } finally {
      retrying.destroy();
    }
    const after = partition(await fetchLocalDynamoReport(throttling.db.endpoint), q)!;
    expect(after.writeUnits).toBe(3_000);
    expect(after.throttledRequests).toBeGreaterThan(0);
  });

  it("the same writes spread over many partitions are not throttled", async () => {
    const prefix = ns();
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        throttling.client.send(new PutItemCommand({ TableName: table, Item: item100(`${prefix}-${i}`, "A") })),
      ),
    );
    const report = await fetchLocalDynamoReport(throttling.db.endpoint);
    const rows = report.partitions.filter((row) => row.partitionKey.startsWith(prefix));
    expect(rows).toHaveLength(30);
    expect(rows.every((row) => row.writeUnits === 100 && row.throttledRequests === 0)).toBe(true);
  });

  it("a 3 KB item costs 3 units, in a transaction 6, a write refused by its condition all the same", async () => {
    const [single, tx, refused] = [ns(), ns(), ns()];
    await throttling.client.send(new PutItemCommand({ TableName: table, Item: { ...key(single), ...padding(2_800) } }));
    await throttling.client.send(txPut([{ ...key(tx), ...padding(2_800) }]));
    await throttling.client.send(
      new PutItemCommand({ TableName: table, Item: { ...key(refused), ...padding(2_800) } }),
    );
    const failed = await settle(
      throttling.client.send(
        new PutItemCommand({
          TableName: table,
          Item: { ...key(refused), ...padding(2_800) },
          ConditionExpression: "attribute_not_exists(PK)",
        }),
      ),
    );
    expect(reasonOf(failed)?.name).toBe("ConditionalCheckFailedException");
    const report = await fetchLocalDynamoReport(throttling.db.endpoint);
    expect(partition(report, single)?.writeUnits).toBe(3);
    expect(partition(report, tx)?.writeUnits).toBe(6);
    expect(partition(report, refused)?.writeUnits).toBe(3 + 3);
  });

  // The tests below run on a server with a tenth of the limits (100 write, 300 read units/s), so
  // that this shared, slow machine outruns a partition for certain.

  it("a throttled GSI partition throttles the table's writes, on partitions of their own", async () => {
    const hot = ns();
    // 60 items of 10 units on 60 table partitions, all in one GSI1 partition: 600 units there at once
    const results = await Promise.allSettled(
      Array.from({ length: 60 }, (_, i) =>
        scarce.client.send(
          new PutItemCommand({
            TableName: table,
            Item: { ...key(`${hot}-${i}`), GSI1PK: { S: hot }, GSI1SK: { S: String(i) }, ...padding(9_400) },
          }),
        ),
      ),
    );
    const failures = results.filter((r) => r.status === "rejected");
    expect(failures.length).toBeGreaterThan(0);
    expect(new Set(failures.map((r) => reasonOf(r)?.name))).toEqual(
      new Set(["ProvisionedThroughputExceededException"]),
    );
    const report = await fetchLocalDynamoReport(scarce.db.endpoint);
    expect(partition(report, hot, "GSI1")?.throttledRequests).toBe(failures.length);
    const tableRows = report.partitions.filter((row) => row.index === null && row.partitionKey.startsWith(`${hot}-`));
    expect(tableRows.every((row) => row.throttledRequests === 0)).toBe(true);
    // a refused write wrote nothing, to the table or the index
    const written = await Promise.all(Array.from({ length: 60 }, (_, i) => get(scarce, key(`${hot}-${i}`))));
    expect(written.filter(Boolean)).toHaveLength(60 - failures.length);
  });

  it("a transaction on a throttled partition is cancelled with ThrottlingError on that item, nothing applied", async () => {
    const [hot, cold] = [ns(), ns()];
    // drain the hot partition: 30 writes of 10 units against 100
    await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) =>
        scarce.client.send(new PutItemCommand({ TableName: table, Item: { ...key(hot, `s${i}`), ...padding(9_500) } })),
      ),
    );
    // 40 KB at 2x: 80 units, more than the drained bucket refills in the next 0.8 s
    const tx = await settle(scarce.client.send(txPut([{ ...key(cold) }, { ...key(hot, "tx"), ...padding(40_000) }])));
    const err = reasonOf(tx)!;
    expect(err.name).toBe("TransactionCanceledException");
    expect(err.CancellationReasons?.map((r) => r.Code)).toEqual(["None", "ThrottlingError"]);
    expect(await get(scarce, key(cold))).toBeUndefined();
    expect(await get(scarce, key(hot, "tx"))).toBeUndefined();
  });

  it("reads past the read limit: GetItem and Query throttled; BatchWriteItem returns its throttled items", async () => {
    const p = ns();
    await scarce.client.send(new PutItemCommand({ TableName: table, Item: { ...key(p, "big"), ...padding(99_000) } }));
    // strong reads of 25 units: 40 of them are 1,000 units against 300
    const reads = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) =>
        i % 2
          ? scarce.client.send(new GetItemCommand({ TableName: table, Key: key(p, "big"), ConsistentRead: true }))
          : scarce.client.send(
              new QueryCommand({
                TableName: table,
                KeyConditionExpression: "PK = :p",
                ExpressionAttributeValues: { ":p": { S: p } },
                ConsistentRead: true,
              }),
            ),
      ),
    );
    const names = new Set(reads.flatMap((r) => (r.status === "rejected" ? [(r.reason as SdkError).name] : [])));
    expect(names).toEqual(new Set(["ProvisionedThroughputExceededException"]));

    // a batch whose writes to one partition outrun it: those come back unprocessed, the others are written
    const q = ns();
    const out = await scarce.client.send(
      new BatchWriteItemCommand({
        RequestItems: {
          [table]: [
            ...Array.from({ length: 20 }, (_, i) => ({
              PutRequest: { Item: { ...key(q, `s${i}`), ...padding(9_500) } },
            })),
            { PutRequest: { Item: key(ns()) } },
          ],
        },
      }),
    );
    const unprocessed = out.UnprocessedItems?.[table] ?? [];
    expect(unprocessed.length).toBeGreaterThan(0);
    expect(unprocessed.every((r) => r.PutRequest?.Item?.PK?.S === q)).toBe(true);
  });
});

describe("the report", () => {
  it("per partition: the units sent, the peak in any one second, and a table of the top partitions", async () => {
    const p = ns();
    const putSmall = (sk: string) =>
      throttling.client.send(new PutItemCommand({ TableName: table, Item: { ...key(p, sk), ...padding(2_800) } }));
    const before = await fetchLocalDynamoReport(throttling.db.endpoint, { reset: true });
    expect(before.mode).toBe("aws");
    // a burst of 5 writes of 3 units, a pause of more than a second, 2 more, then 4 strong reads of 1 unit
    await Promise.all(["a", "b", "c", "d", "e"].map(putSmall));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await Promise.all(["f", "g"].map(putSmall));
    await Promise.all(["a", "b", "c", "d"].map((sk) => get(throttling, key(p, sk))));

    const report = await fetchLocalDynamoReport(throttling.db.endpoint);
    expect(report.partitions).toHaveLength(1); // the reset forgot everything before
    expect(partition(report, p)).toEqual({
      table,
      index: null,
      partitionKey: p,
      readUnits: 4,
      writeUnits: 21,
      peakReadUnitsPerSecond: 4,
      peakWriteUnitsPerSecond: 15,
      throttledRequests: 0,
      conflicts: 0,
    });
    expect(report.totals).toEqual({ readUnits: 4, writeUnits: 21, throttledRequests: 0, conflicts: 0, partitions: 1 });
    const text = formatPartitionReport(report, { top: 5 });
    expect(text.split("\n")[1]).toMatch(new RegExp(`^${table} ${p} +21 +15/1000 \\(2%\\) +4 +4/3000 \\(0%\\) +0 +0$`));
  });
});
