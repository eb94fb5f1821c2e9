/**
 * The single table. Every entity (event, seat, general-admission area, hold, purchase, outbox
 * record) lives here, told apart by key prefixes and an `entity` attribute; key strings are
 * documented in docs/data-model.md and built only in src/inventory/keys.ts.
 *
 * GSI1 is sparse: events by on-sale time, operator actions by day, and the purchases of events
 * created before GSI3 (by status). GSI2 is sparse and sharded: general-admission holds keyed by
 * expiry, for the sweeper, and their confirmed ones; notices; held seats of events created before
 * issue 30 item 2 and the outbox of events created before GSI3.
 * GSI3 is sparse and KEYS_ONLY: the open purchases of an event (pending, or confirmed and not yet
 * acknowledged, or a refund under way), entered at creation and left at the acknowledgement (or
 * the failure), its key never changing in between: 2 write units a sale (docs/data-model.md).
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  type AttributeDefinition,
  CreateTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  type GlobalSecondaryIndex,
  ResourceInUseException,
  ResourceNotFoundException,
  UpdateTableCommand,
} from "@aws-sdk/client-dynamodb";

export const GSI1 = "GSI1";
export const GSI2 = "GSI2";
export const GSI3 = "GSI3";

const GSI3_ATTRIBUTES: AttributeDefinition[] = [
  { AttributeName: "GSI3PK", AttributeType: "S" },
  { AttributeName: "GSI3SK", AttributeType: "S" },
];

/**
 * KEYS_ONLY: an entry is rewritten only when its keys change, which they never do between
 * entering (a purchase created) and leaving (acknowledged, failed, refunded); its readers read the
 * items by key. Projection ALL would charge a unit at every update of the purchase.
 */
const GSI3_INDEX: GlobalSecondaryIndex = {
  IndexName: GSI3,
  KeySchema: [
    { AttributeName: "GSI3PK", KeyType: "HASH" },
    { AttributeName: "GSI3SK", KeyType: "RANGE" },
  ],
  Projection: { ProjectionType: "KEYS_ONLY" },
};

export async function tableExists(client: DynamoDBClient, tableName: string): Promise<boolean> {
  try {
    const out = await client.send(new DescribeTableCommand({ TableName: tableName }));
    return out.Table?.TableStatus === "ACTIVE";
  } catch (err) {
    if (err instanceof ResourceNotFoundException) return false;
    throw err;
  }
}

/** The table's index names and their status (ACTIVE, CREATING, ...), or null when there is no table. */
async function indexesOf(client: DynamoDBClient, tableName: string): Promise<Map<string, string> | null> {
  try {
    const out = await client.send(new DescribeTableCommand({ TableName: tableName }));
    return new Map(
      (out.Table?.GlobalSecondaryIndexes ?? []).map((i) => [i.IndexName ?? "", i.IndexStatus ?? "ACTIVE"]),
    );
  } catch (err) {
    if (err instanceof ResourceNotFoundException) return null;
    throw err;
  }
}

/** True when the table exists and has no GSI3 (made before it); false when it has it or does not exist. */
export async function lacksOpenPurchasesIndex(client: DynamoDBClient, tableName: string): Promise<boolean> {
  const indexes = await indexesOf(client, tableName);
  return indexes !== null && !indexes.has(GSI3);
}

function madeBefore(tableName: string, why: string): Error {
  return new Error(
    `table ${tableName} was made before the open-purchases index (GSI3) and this endpoint did not add it (${why}): ` +
      "a local table: start the local DynamoDB without --path (or with a new one), or set another DYNAMODB_TABLE",
  );
}

/**
 * A table made before GSI3 gets it added (UpdateTable; DynamoDB backfills it from the items, and
 * every item written before has no GSI3 keys, so it stays empty until new purchases arrive). An
 * index cannot be changed in place, so GSI1 and GSI2 stay as they are for the events made before.
 * dynalite (the local DynamoDB) cannot add an index (it refuses the request without provisioned
 * throughput, and adds nothing with it): a local table kept on disk
 * (`npm run dynamodb -- --path`) from before is refused with what to do, never used half-made.
 */
async function addOpenPurchasesIndex(client: DynamoDBClient, tableName: string, timeoutMs: number): Promise<void> {
  let indexes = await indexesOf(client, tableName);
  if (indexes?.get(GSI3) === "ACTIVE") return;
  if (!indexes?.has(GSI3)) {
    try {
      await client.send(
        new UpdateTableCommand({
          TableName: tableName,
          AttributeDefinitions: GSI3_ATTRIBUTES,
          GlobalSecondaryIndexUpdates: [{ Create: GSI3_INDEX }],
        }),
      );
    } catch (err) {
      // Another gateway is adding it (LimitExceeded / ResourceInUse while the table updates).
      const name = (err as { name?: string }).name;
      if (name === "ValidationException") throw madeBefore(tableName, (err as Error).message);
      if (!(err instanceof ResourceInUseException) && name !== "LimitExceededException") throw err;
    }
  }
  const started = Date.now();
  const deadline = started + timeoutMs;
  for (;;) {
    indexes = await indexesOf(client, tableName);
    if (indexes?.get(GSI3) === "ACTIVE") return;
    // DynamoDB lists an index it is creating at once; one still absent after 2 s will not come.
    if (!indexes?.has(GSI3) && Date.now() - started > 2_000) throw madeBefore(tableName, "the index did not appear");
    if (Date.now() > deadline) throw new Error(`index ${GSI3} of ${tableName} did not become ACTIVE in time`);
    await sleep(500);
  }
}

/**
 * Creates the table if it does not exist and waits until it is ACTIVE; adds GSI3 to a table made
 * before it (waiting for the backfill, `indexTimeoutMs`, default 10 minutes).
 */
export async function ensureTable(
  client: DynamoDBClient,
  tableName: string,
  options: { indexTimeoutMs?: number } = {},
): Promise<void> {
  if (await tableExists(client, tableName)) {
    await addOpenPurchasesIndex(client, tableName, options.indexTimeoutMs ?? 10 * 60_000);
    return;
  }
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
          ...GSI3_ATTRIBUTES,
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
          GSI3_INDEX,
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
  // The table being created when we looked may be another's, of the layout before GSI3.
  await addOpenPurchasesIndex(client, tableName, options.indexTimeoutMs ?? 10 * 60_000);
}
