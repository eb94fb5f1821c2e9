/**
 * What each inventory operation costs in DynamoDB capacity, as DynamoDB itself reports it.
 *
 * `meterCapacity(client, meter)` asks every data command for `ReturnConsumedCapacity: INDEXES`
 * (unless the caller asked for something itself) and adds what the answer reports to `meter`,
 * under the inventory operation that sent it: `guard(what, ...)` in src/inventory/store.ts runs
 * each operation inside `withOperation(what, ...)`, so a sweep, a hold and a confirm are counted
 * apart even when they share a client. It works the same against AWS and the local DynamoDB
 * (whose units follow DynamoDB's rules: docs/local-dynamodb.md).
 *
 * What an answer does not report is not counted here: a write refused by its condition, and a
 * cancelled transaction, are charged by DynamoDB but come back as errors without
 * ConsumedCapacity. Their count is kept (`refused`), and the local DynamoDB's own report
 * (src/local/dynamodb-report.ts) has the server-side total to hold this against.
 *
 * Off by default: the operation label lives in an AsyncLocalStorage, which is entered only once a
 * meter is attached, so a gateway that meters nothing pays nothing for it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";

const READS = new Set(["GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"]);
const METERED = new Set([...READS, "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"]);

/** Document-client commands are named after what they send. */
const BASE_COMMAND: Record<string, string> = {
  Get: "GetItem",
  Put: "PutItem",
  Update: "UpdateItem",
  Delete: "DeleteItem",
  Query: "Query",
  Scan: "Scan",
  BatchGet: "BatchGetItem",
  BatchWrite: "BatchWriteItem",
  TransactGet: "TransactGetItems",
  TransactWrite: "TransactWriteItems",
};

export function baseCommandName(commandName: string | undefined): string {
  const name = String(commandName ?? "unknown").replace(/Command$/, "");
  return BASE_COMMAND[name] ?? name;
}

const operation = new AsyncLocalStorage<string>();
let metering = false;

/** Runs `fn` as the inventory operation `name` (what the meter files its capacity under). */
export function withOperation<T>(name: string, fn: () => Promise<T>): Promise<T> {
  return metering ? operation.run(name, fn) : fn();
}

export interface CapacityRow {
  operation: string;
  /** Commands answered (with capacity reported). */
  requests: number;
  /** Commands refused by a condition or cancelled: charged by DynamoDB, not reported. */
  refused: number;
  readUnits: number;
  writeUnits: number;
  /** Of those, what the global secondary indexes took. */
  indexReadUnits: number;
  indexWriteUnits: number;
}

export interface CapacityMeter {
  record(operation: string, command: string, consumed: unknown, refused: boolean): void;
  rows(): CapacityRow[];
  total(): CapacityRow;
  reset(): void;
}

interface Consumed {
  CapacityUnits?: number;
  ReadCapacityUnits?: number;
  WriteCapacityUnits?: number;
  Table?: { CapacityUnits?: number };
  GlobalSecondaryIndexes?: Record<string, { CapacityUnits?: number }>;
}

const emptyRow = (operation: string): CapacityRow => ({
  operation,
  requests: 0,
  refused: 0,
  readUnits: 0,
  writeUnits: 0,
  indexReadUnits: 0,
  indexWriteUnits: 0,
});

export function createCapacityMeter(): CapacityMeter {
  const byOperation = new Map<string, CapacityRow>();
  const row = (name: string): CapacityRow => {
    let r = byOperation.get(name);
    if (!r) {
      r = emptyRow(name);
      byOperation.set(name, r);
    }
    return r;
  };
  return {
    record(name, command, consumed, refused) {
      const r = row(name);
      if (refused) {
        r.refused++;
        return;
      }
      r.requests++;
      const read = READS.has(command);
      const list = (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) as Consumed[];
      for (const c of list) {
        const units = c.CapacityUnits ?? (read ? c.ReadCapacityUnits : c.WriteCapacityUnits) ?? 0;
        const index = Object.values(c.GlobalSecondaryIndexes ?? {}).reduce((n, i) => n + (i.CapacityUnits ?? 0), 0);
        if (read) {
          r.readUnits += units;
          r.indexReadUnits += index;
        } else {
          r.writeUnits += units;
          r.indexWriteUnits += index;
        }
      }
    },
    rows: () => [...byOperation.values()].sort((a, b) => b.writeUnits - a.writeUnits || b.readUnits - a.readUnits),
    total() {
      const sum = emptyRow("total");
      for (const r of byOperation.values()) {
        sum.requests += r.requests;
        sum.refused += r.refused;
        sum.readUnits += r.readUnits;
        sum.writeUnits += r.writeUnits;
        sum.indexReadUnits += r.indexReadUnits;
        sum.indexWriteUnits += r.indexWriteUnits;
      }
      return sum;
    },
    reset: () => byOperation.clear(),
  };
}

const REFUSED = new Set(["ConditionalCheckFailedException", "TransactionCanceledException"]);

/** Attaches `meter` to `client`: from now on every inventory operation is labelled and counted. */
export function meterCapacity(client: DynamoDBClient, meter: CapacityMeter): void {
  metering = true;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = baseCommandName(context.commandName);
      if (!METERED.has(command)) return next(args);
      const input = args.input as { ReturnConsumedCapacity?: string };
      if (input.ReturnConsumedCapacity === undefined || input.ReturnConsumedCapacity === "NONE") {
        args.input = { ...input, ReturnConsumedCapacity: "INDEXES" };
      }
      const name = operation.getStore() ?? "other";
      try {
        const out = await next(args);
        meter.record(name, command, (out.output as { ConsumedCapacity?: unknown }).ConsumedCapacity, false);
        return out;
      } catch (err) {
        if (REFUSED.has((err as Error).name)) meter.record(name, command, undefined, true);
        throw err;
      }
    },
    { step: "initialize", name: "capacityMeter", override: true },
  );
}
