/**
 * `npm run bench:inventory`: throughput of the inventory against one DynamoDB endpoint, beside the
 * raw conditional UpdateItem rate of the same endpoint in the same run, so the figures read as
 * ratios (what the inventory costs over the bare primitive) rather than as absolutes of a laptop.
 *
 * DYNAMODB_ENDPOINT: use it (a bench table is created and deleted); unset: spawn the local one.
 * BENCH_OPS (default 3000), BENCH_CONCURRENCY (default 64), BENCH_SEATS (default 100000).
 * Prints a table, then one JSON line.
 */
import { DeleteTableCommand } from "@aws-sdk/client-dynamodb";
import { BatchWriteCommand, DynamoDBDocumentClient, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { createDynamoClient } from "../src/dynamodb/client.js";
import { ensureTable } from "../src/dynamodb/table.js";
import { createInventory, type Hold } from "../src/inventory/index.js";
import { SEAT_HOLD_CONDITION, SEAT_HOLD_UPDATE } from "../src/inventory/holds.js";
import { spawnLocalDynamoDB, type SpawnedDynamoDB } from "../src/local/dynamodb.js";
import { timed } from "./lib/in-flight.js";

const OPS = Number(process.env.BENCH_OPS ?? 3_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const SEATS = Number(process.env.BENCH_SEATS ?? 100_000);

interface Row {
  scenario: string;
  ops: number;
  ms: number;
  perSecond: number;
  /** perSecond / the raw rate it compares with. */
  ratio?: number;
  note?: string;
}

const rate = (ops: number, ms: number) => Math.round((ops / ms) * 1000);

/** true if the write applied, false if its condition failed. */
function settle(p: Promise<unknown>): Promise<boolean> {
  return p.then(
    () => true,
    (err: { name?: string }) => {
      if (err.name === "ConditionalCheckFailedException") return false;
      throw err;
    },
  );
}

const spawned: SpawnedDynamoDB | undefined = process.env.DYNAMODB_ENDPOINT
  ? undefined
  : await spawnLocalDynamoDB({ port: 0 });
const endpoint = spawned?.endpoint ?? process.env.DYNAMODB_ENDPOINT!;
const client = createDynamoClient({
  endpoint,
  region: process.env.AWS_REGION ?? "us-east-1",
  maxSockets: 256,
  maxAttempts: 3,
  requestTimeoutMs: 30_000,
});
const doc = DynamoDBDocumentClient.from(client);
const tableName = `bench_inventory_${Date.now()}`;
const rows: Row[] = [];

/**
 * Adds the row of `ops` calls in `ms`, with its rate over `base`, the raw rate it compares with
 * (unset: it is a raw rate itself, ratio 1); returns its rate.
 */
function addRow(scenario: string, ops: number, ms: number, base?: number, note?: string): number {
  const perSecond = rate(ops, ms);
  rows.push({
    scenario,
    ops,
    ms,
    perSecond,
    ratio: base === undefined ? 1 : perSecond / base,
    ...(note ? { note } : {}),
  });
  return perSecond;
}

try {
  await ensureTable(client, tableName);
  const inventory = createInventory({ client, tableName });
  const onSaleAt = new Date(Date.now() - 1_000).toISOString();
  const waitingRoom = { admitPerSecond: 50, maxActive: 2_000, sessionSeconds: 900 };

  // --- createEvent with SEATS seats (2,000 per section) ---
  {
    const sections = Math.ceil(SEATS / 2_000);
    let reports = 0;
    const started = performance.now();
    const created = await inventory.events.create({
      eventId: "bench_big",
      input: {
        name: "Bench",
        onSaleAt: new Date(Date.now() + 3_600_000).toISOString(),
        holdSeconds: 480,
        maxSeatsPerFan: 8,
        sections: Array.from({ length: sections }, (_, i) => ({
          id: `S${i}`,
          tier: "T",
          price: 100,
          rows: 40,
          seatsPerRow: 50,
        })),
        generalAdmission: [],
        waitingRoom,
      },
      onProgress: () => reports++,
    });
    const ms = performance.now() - started;
    if (!created.ok) throw new Error(`createEvent failed: ${JSON.stringify(created)}`);
    rows.push({
      scenario: `createEvent, ${created.seatsWritten.toLocaleString("en")} seats (BatchWriteItem)`,
      ops: created.seatsWritten,
      ms,
      perSecond: rate(created.seatsWritten, ms),
      note: `${reports} progress reports`,
    });
  }

  // --- the event the hold/confirm runs use: enough distinct seats for every scenario ---
  const perRow = 50;
  const selfRace = Math.min(OPS, 1_000);
  const benchRows = Math.ceil((2 * OPS + 4 * Math.floor(OPS / 2) + selfRace + 1) / perRow);
  const created = await inventory.events.create({
    eventId: "bench",
    input: {
      name: "Bench",
      onSaleAt,
      holdSeconds: 3_600,
      maxSeatsPerFan: 8,
      sections: [{ id: "B", tier: "T", price: 100, rows: benchRows, seatsPerRow: perRow }],
      generalAdmission: [],
      waitingRoom,
    },
  });
  if (!created.ok) throw new Error(`createEvent failed: ${JSON.stringify(created)}`);
  let cursor = 0;
  const seatAt = (k: number) => `B-${Math.floor(k / perRow) + 1}-${(k % perRow) + 1}`;
  const nextSeats = (n: number) => Array.from({ length: n }, () => seatAt(cursor++));

  // --- raw conditional UpdateItem, distinct items and one hot item ---
  const rawKeys = Array.from({ length: OPS }, (_, i) => ({ PK: `BENCH#raw#${i}`, SK: "RAW" }));
  for (let i = 0; i < rawKeys.length; i += 25) {
    await doc.send(
      new BatchWriteCommand({
        RequestItems: {
          [tableName]: rawKeys.slice(i, i + 25).map((k) => ({ PutRequest: { Item: { ...k, status: "available" } } })),
        },
      }),
    );
  }
  for (const PK of ["BENCH#hot", "BENCH#hot2"]) {
    await doc.send(new PutCommand({ TableName: tableName, Item: { PK, SK: "RAW", status: "available" } }));
  }
  // Minimal: the smallest conditional write that can claim an item.
  const rawUpdate = (key: { PK: string; SK: string }, who: string) =>
    settle(
      doc.send(
        new UpdateCommand({
          TableName: tableName,
          Key: key,
          UpdateExpression: "SET #s = :held, holder = :who",
          ConditionExpression: "attribute_exists(PK) AND #s = :available",
          ExpressionAttributeNames: { "#s": "status" },
          ExpressionAttributeValues: { ":held": "held", ":available": "available", ":who": who },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      ),
    );
  // The hold's own expressions (keys, condition, GSI moves), without the module around it.
  const rawHoldShaped = (key: { PK: string; SK: string }, who: string) => {
    const now = Date.now();
    return settle(
      doc.send(
        new UpdateCommand({
          TableName: tableName,
          Key: key,
          UpdateExpression: SEAT_HOLD_UPDATE,
          ConditionExpression: SEAT_HOLD_CONDITION,
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: {
            ":held": "held",
            ":available": "available",
            ":fan": who,
            ":hold": who,
            ":exp": now + 60_000,
            ":now": now,
          },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      ),
    );
  };
  const rawDistinctMs = await timed(OPS, CONCURRENCY, (i) => rawUpdate(rawKeys[i]!, `f${i}`));
  const rawDistinct = addRow("raw conditional UpdateItem, distinct items", OPS, rawDistinctMs);
  let rawHotWins = 0;
  const rawHotMs = await timed(OPS, CONCURRENCY, async (i) => {
    if (await rawUpdate({ PK: "BENCH#hot", SK: "RAW" }, `f${i}`)) rawHotWins++;
  });
  const rawHot = addRow("raw conditional UpdateItem, one hot item", OPS, rawHotMs, undefined, `${rawHotWins} won`);
  const shapedKeys = Array.from({ length: OPS }, (_, i) => ({ PK: `BENCH#shaped#${i}`, SK: "RAW" }));
  for (let i = 0; i < shapedKeys.length; i += 25) {
    await doc.send(
      new BatchWriteCommand({
        RequestItems: {
          [tableName]: shapedKeys
            .slice(i, i + 25)
            .map((k) => ({ PutRequest: { Item: { ...k, status: "available" } } })),
        },
      }),
    );
  }
  const shapedMs = await timed(OPS, CONCURRENCY, (i) => rawHoldShaped(shapedKeys[i]!, `f${i}`));
  addRow("raw UpdateItem with the hold's expressions, distinct items", OPS, shapedMs, rawDistinct);
  const shapedHotMs = await timed(OPS, CONCURRENCY, (i) => rawHoldShaped({ PK: "BENCH#hot2", SK: "RAW" }, `f${i}`));
  addRow("raw UpdateItem with the hold's expressions, one hot item", OPS, shapedHotMs, rawHot);

  // --- holds on distinct seats ---
  const singleSeats = nextSeats(OPS);
  const singleHolds: Hold[] = [];
  const holdMs = await timed(OPS, CONCURRENCY, async (i) => {
    const r = await inventory.holds.holdSeats({
      eventId: "bench",
      fanId: `fan-${i}`,
      seatIds: [singleSeats[i]!],
      holdSeconds: 3_600,
    });
    if (!r.ok) throw new Error(`hold failed: ${JSON.stringify(r)}`);
    singleHolds[i] = r.hold;
  });
  addRow(
    "hold, 1 seat, distinct seats (BatchGetItem ledger and seat, ledger PutItem, seat UpdateItem)",
    OPS,
    holdMs,
    rawDistinct,
  );

  // The same fans again: their ledger exists, so it is a conditional Update on its version.
  const againSeats = nextSeats(OPS);
  const againMs = await timed(OPS, CONCURRENCY, async (i) => {
    const r = await inventory.holds.holdSeats({
      eventId: "bench",
      fanId: `fan-${i}`,
      seatIds: [againSeats[i]!],
      holdSeconds: 3_600,
    });
    if (!r.ok) throw new Error(`hold failed: ${JSON.stringify(r)}`);
  });
  addRow("hold, 1 seat, distinct seats, the fan's second hold (ledger UpdateItem)", OPS, againMs, rawDistinct);

  const multi = Math.floor(OPS / 2);
  const multiSeats = Array.from({ length: multi }, () => nextSeats(4));
  const multiHolds: Hold[] = [];
  const multiMs = await timed(multi, CONCURRENCY, async (i) => {
    const r = await inventory.holds.holdSeats({
      eventId: "bench",
      fanId: `mfan-${i}`,
      seatIds: multiSeats[i]!,
      holdSeconds: 3_600,
    });
    if (!r.ok) throw new Error(`hold failed: ${JSON.stringify(r)}`);
    multiHolds[i] = r.hold;
  });
  addRow("hold, 4 seats, distinct seats (ledger write, TransactWriteItems of 4 seats)", multi, multiMs, rawDistinct);

  // --- confirms on distinct seats: pending purchases first (timed on their own), then confirm ---
  const pendingMs = await timed(OPS, CONCURRENCY, async (i) => {
    const h = singleHolds[i]!;
    const r = await inventory.purchases.createPending({
      eventId: "bench",
      holdId: h.holdId,
      fanId: h.fanId,
      purchaseId: `pur_${i}`,
    });
    if (!r.ok) throw new Error(`pending failed: ${JSON.stringify(r)}`);
  });
  addRow("createPendingPurchase (reads + conditional Put)", OPS, pendingMs, rawDistinct);
  const confirmMs = await timed(OPS, CONCURRENCY, async (i) => {
    const h = singleHolds[i]!;
    const r = await inventory.purchases.confirm({
      eventId: "bench",
      holdId: h.holdId,
      fanId: h.fanId,
      purchaseId: `pur_${i}`,
    });
    if (!r.ok || r.alreadyConfirmed) throw new Error(`confirm failed: ${JSON.stringify(r)}`);
  });
  addRow("confirm, 1 seat, distinct seats (2 reads + TransactWriteItems, 5 actions)", OPS, confirmMs, rawDistinct);

  // --- one hot seat: every fan wants the same (so far untouched) seat ---
  const [hotSeat] = nextSeats(1);
  let hotWins = 0;
  const hotMs = await timed(OPS, CONCURRENCY, async (i) => {
    const r = await inventory.holds.holdSeats({
      eventId: "bench",
      fanId: `hot-${i}`,
      seatIds: [hotSeat!],
      holdSeconds: 3_600,
    });
    if (r.ok) hotWins++;
    else if (r.reason !== "seat_unavailable") throw new Error(`hot hold: ${JSON.stringify(r)}`);
  });
  addRow("hold, one hot seat (all fans, same seat)", OPS, hotMs, rawHot, `${hotWins} won`);

  // One fan racing itself: every hold in flight at once is the same fan's, on distinct seats. The
  // fan's ledger serializes them: one wins per round, the others read it again; past the limit
  // (8) each costs one GetItem.
  const raceSeats = nextSeats(selfRace);
  let raceWins = 0;
  let raceRefused = 0;
  const raceMs = await timed(selfRace, CONCURRENCY, async (i) => {
    const r = await inventory.holds.holdSeats({
      eventId: "bench",
      fanId: "racer",
      seatIds: [raceSeats[i]!],
      holdSeconds: 3_600,
    });
    if (r.ok) raceWins++;
    else if (r.reason === "seat_limit_exceeded") raceRefused++;
    else throw new Error(`self race: ${JSON.stringify(r)}`);
  });
  addRow(
    "hold, 1 seat, one fan racing itself (limit 8)",
    selfRace,
    raceMs,
    rawDistinct,
    `${raceWins} held, ${raceRefused} seat_limit_exceeded`,
  );

  // Hot confirm: the same purchase confirmed by many at once (retries, double clicks, two
  // gateways): they all pass the pre-reads together and meet at the transaction.
  const hot = multiHolds[0]!;
  await inventory.purchases.createPending({
    eventId: "bench",
    holdId: hot.holdId,
    fanId: hot.fanId,
    purchaseId: "pur_hot",
  });
  let committed = 0;
  const hotConfirms = Math.min(OPS, 1_000);
  const hotConfirmMs = await timed(hotConfirms, hotConfirms, async () => {
    const r = await inventory.purchases.confirm({
      eventId: "bench",
      holdId: hot.holdId,
      fanId: hot.fanId,
      purchaseId: "pur_hot",
    });
    if (!r.ok) throw new Error(`hot confirm: ${JSON.stringify(r)}`);
    if (!r.alreadyConfirmed) committed++;
  });
  addRow(
    "confirm, one hot hold (same purchase, all at once)",
    hotConfirms,
    hotConfirmMs,
    rawHot,
    `${committed} committed, ${hotConfirms - committed} got the first result`,
  );

  // --- print ---
  const w = Math.max(...rows.map((r) => r.scenario.length));
  console.log(
    `\ninventory benchmark: ${endpoint}${spawned ? " (spawned local DynamoDB)" : ""}, concurrency ${CONCURRENCY}, ${OPS} ops per run\n`,
  );
  console.log(
    `${"scenario".padEnd(w)}  ${"ops".padStart(7)}  ${"seconds".padStart(8)}  ${"ops/s".padStart(8)}  ${"x raw".padStart(6)}  note`,
  );
  for (const r of rows) {
    console.log(
      `${r.scenario.padEnd(w)}  ${String(r.ops).padStart(7)}  ${(r.ms / 1000).toFixed(2).padStart(8)}  ${String(r.perSecond).padStart(8)}  ${(r.ratio !== undefined ? r.ratio.toFixed(2) : "").padStart(6)}  ${r.note ?? ""}`,
    );
  }
  console.log(
    JSON.stringify({
      bench: "inventory",
      endpoint: spawned ? "local-spawned" : endpoint,
      concurrency: CONCURRENCY,
      ops: OPS,
      results: rows.map((r) => ({
        ...r,
        ms: Math.round(r.ms),
        ...(r.ratio !== undefined ? { ratio: Number(r.ratio.toFixed(3)) } : {}),
      })),
    }),
  );
} finally {
  if (!spawned) await client.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
  client.destroy();
  await spawned?.close();
}
