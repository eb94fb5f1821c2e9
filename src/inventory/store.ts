/**
 * What every inventory module shares of the SDK: the document client, the error classification
 * that turns SDK exceptions into values, and the retry policy for transactions that collide. The
 * aggregate modules (events, holds, fans, purchases, outbox, reads, sweep) build their own
 * commands with @aws-sdk/lib-dynamodb and send them through `ctx.doc`; the SDK stops at the
 * inventory's edge: nothing SDK-shaped is exported past src/inventory/index.ts.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  DynamoDBDocumentClient,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
  TransactWriteCommand,
  type TransactWriteCommandInput,
  UpdateCommand,
  type UpdateCommandInput,
} from "@aws-sdk/lib-dynamodb";
import { withOperation } from "../dynamodb/capacity.js";
import { InventoryUnavailableError } from "./types.js";
import type { Clock } from "./types.js";

export type Item = Record<string, unknown>;
export type TransactItem = NonNullable<TransactWriteCommandInput["TransactItems"]>[number];

export interface Ctx {
  doc: DynamoDBDocumentClient;
  tableName: string;
  clock: Clock;
}

export function createCtx(client: DynamoDBClient, tableName: string, clock: Clock): Ctx {
  const doc = DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true },
  });
  return { doc, tableName, clock };
}

function errorName(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "name" in err ? String((err as { name: unknown }).name) : undefined;
}

/** A failed condition on a single-item write; `item` is the ALL_OLD image when there was an item. */
export function conditionFailure(err: unknown): { item: Item | undefined } | null {
  if (errorName(err) !== "ConditionalCheckFailedException") return null;
  const raw = (err as { Item?: unknown }).Item;
  return { item: raw ? fromAttributeMap(raw) : undefined };
}

/** Another transaction holds the item a single-item write targets (real DynamoDB only). */
export function isTransactionConflict(err: unknown): boolean {
  return errorName(err) === "TransactionConflictException";
}

const RETRYABLE_CODES = new Set(["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"]);

export interface CancellationReason {
  code: string;
  /** ALL_OLD image, present for ConditionalCheckFailed on an item that existed. */
  item: Item | undefined;
}

export type TransactOutcome =
  | { ok: true }
  /** At least one condition failed: `reasons[i]` belongs to `items[i]`. */
  | { ok: false; contention: false; reasons: CancellationReason[] }
  /** Only collisions with other transactions (or throttling), retries exhausted. */
  | { ok: false; contention: true };

export { sleep };

/** Exponential backoff with full jitter: 0..min(cap, base * 2^attempt) ms. */
export function backoff(attempt: number, baseMs = 10, capMs = 1_000): Promise<void> {
  return sleep(Math.random() * Math.min(capMs, baseMs * 2 ** attempt));
}

/**
 * One conditional UpdateItem on the table: true when it was applied, false when its condition
 * failed. A collision with a transaction on the same item (real DynamoDB only) is tried again
 * with jittered backoff, up to `attempts` tries in all; any other error is thrown.
 */
export async function conditionalUpdate(
  ctx: Ctx,
  input: Omit<UpdateCommandInput, "TableName">,
  attempts = 1,
): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    try {
      await ctx.doc.send(new UpdateCommand({ ...input, TableName: ctx.tableName }));
      return true;
    } catch (err) {
      if (conditionFailure(err)) return false;
      if (!isTransactionConflict(err) || attempt + 1 >= attempts) throw err;
      await backoff(attempt, 15, 500);
    }
  }
}

/**
 * TransactWriteItems. A cancellation with a failed condition is returned to the caller to read;
 * one caused only by colliding transactions is retried with jittered backoff, because a collision
 * says nothing about the items (in real DynamoDB, two transactions on one item do not queue: the
 * later one is cancelled with TransactionConflict).
 */
export async function transact(ctx: Ctx, items: TransactItem[], attempts = 6): Promise<TransactOutcome> {
  for (let attempt = 0; ; attempt++) {
    try {
      await ctx.doc.send(new TransactWriteCommand({ TransactItems: items }));
      return { ok: true };
    } catch (err) {
      const name = errorName(err);
      if (name === "TransactionCanceledException") {
        const raw =
          (err as { CancellationReasons?: Array<{ Code?: string; Item?: unknown }> }).CancellationReasons ?? [];
        const reasons = raw.map((r) => ({
          code: r.Code ?? "None",
          item: r.Item ? fromAttributeMap(r.Item) : undefined,
        }));
        if (reasons.some((r) => r.code === "ConditionalCheckFailed")) return { ok: false, contention: false, reasons };
        if (!reasons.every((r) => r.code === "None" || RETRYABLE_CODES.has(r.code))) {
          throw unavailable(err, "transaction cancelled");
        }
      } else if (name !== "TransactionConflictException" && name !== "TransactionInProgressException") {
        throw unavailable(err, "transaction failed");
      }
      if (attempt + 1 >= attempts) return { ok: false, contention: true };
      await backoff(attempt, 15, 500);
    }
  }
}

export function unavailable(err: unknown, what: string): InventoryUnavailableError {
  if (err instanceof InventoryUnavailableError) return err;
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new InventoryUnavailableError(`${what}: ${message}`, { cause: err });
}

/** Runs a store call; anything unexpected becomes an InventoryUnavailableError. */
export async function guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await withOperation(what, fn);
  } catch (err) {
    throw unavailable(err, what);
  }
}

/**
 * AttributeValue map -> plain object. Error payloads (ALL_OLD images in exceptions) are not
 * unmarshalled by the document client, so this covers the types the inventory stores.
 */
export function fromAttributeMap(raw: unknown): Item {
  const out: Item = {};
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) out[k] = fromAttributeValue(v);
  return out;
}

function fromAttributeValue(v: unknown): unknown {
  if (typeof v !== "object" || v === null) return v;
  const av = v as Record<string, unknown>;
  if ("S" in av) return av.S;
  if ("N" in av) return Number(av.N);
  if ("BOOL" in av) return av.BOOL;
  if ("NULL" in av) return null;
  if ("L" in av) return (av.L as unknown[]).map(fromAttributeValue);
  if ("M" in av) return fromAttributeMap(av.M);
  if ("SS" in av) return new Set(av.SS as string[]);
  if ("NS" in av) return new Set((av.NS as string[]).map(Number));
  if ("B" in av) return av.B;
  // Already plain (a client that unmarshalled it for us).
  return v;
}

// Typed readers for stored items: a malformed item is a bug, and says so.
export function str(item: Item, name: string): string {
  const v = item[name];
  if (typeof v !== "string") throw new Error(`stored item ${String(item.PK)} lacks string ${name}`);
  return v;
}
export function optStr(item: Item, name: string): string | undefined {
  const v = item[name];
  return typeof v === "string" ? v : undefined;
}
export function num(item: Item, name: string): number {
  const v = item[name];
  if (typeof v !== "number") throw new Error(`stored item ${String(item.PK)} lacks number ${name}`);
  return v;
}
export function optNum(item: Item, name: string): number | undefined {
  const v = item[name];
  return typeof v === "number" ? v : undefined;
}
export function strList(item: Item, name: string): string[] {
  const v = item[name];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

/** Every page of a Query on the table (or an index), in order, LastEvaluatedKey followed. */
export async function* queryPages(
  ctx: Ctx,
  input: Omit<QueryCommandInput, "TableName" | "ExclusiveStartKey">,
): AsyncGenerator<QueryCommandOutput> {
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ctx.doc.send(
      new QueryCommand({ ...input, TableName: ctx.tableName, ...(start ? { ExclusiveStartKey: start } : {}) }),
    );
    yield out;
    start = out.LastEvaluatedKey;
  } while (start);
}

// Bounded concurrency lives in src/concurrency.ts; re-exported for the inventory's own modules.
export { mapLimit } from "../concurrency.js";
