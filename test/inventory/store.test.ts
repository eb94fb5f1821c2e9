/**
 * The transaction retry policy, without I/O. The local DynamoDB queues transactions on an item
 * instead of cancelling the later one with TransactionConflict as DynamoDB does, so these paths
 * are exercised here with a fake document client that answers like DynamoDB.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { describe, expect, it } from "vitest";
import { conditionFailure, type Ctx, fromAttributeMap, transact } from "../../src/inventory/store.js";
import { InventoryUnavailableError } from "../../src/inventory/types.js";

function cancelled(codes: Array<{ Code: string; Item?: Record<string, unknown> }>): Error {
  return Object.assign(new Error("Transaction cancelled"), {
    name: "TransactionCanceledException",
    CancellationReasons: codes,
  });
}

function fakeCtx(answers: Array<Error | "ok">): { ctx: Ctx; calls: () => number } {
  let calls = 0;
  const doc = {
    send: async () => {
      const a = answers[Math.min(calls++, answers.length - 1)];
      if (a === "ok") return {};
      throw a;
    },
  } as unknown as DynamoDBDocumentClient;
  return { ctx: { doc, tableName: "t", clock: () => 0 }, calls: () => calls };
}

const item = { Put: { TableName: "t", Item: { PK: "a", SK: "b" } } };

describe("transact (no I/O)", () => {
  it("retries a cancellation caused only by TransactionConflict, then succeeds", async () => {
    const { ctx, calls } = fakeCtx([
      cancelled([{ Code: "None" }, { Code: "TransactionConflict" }]),
      Object.assign(new Error("conflict"), { name: "TransactionConflictException" }),
      "ok",
    ]);
    expect(await transact(ctx, [item, item])).toEqual({ ok: true });
    expect(calls()).toBe(3);
  });

  it("gives up with contention when collisions persist, having changed nothing", async () => {
    const { ctx, calls } = fakeCtx([cancelled([{ Code: "TransactionConflict" }, { Code: "None" }])]);
    expect(await transact(ctx, [item, item], 4)).toEqual({ ok: false, contention: true });
    expect(calls()).toBe(4);
  });

  it("returns failed conditions at once, with their ALL_OLD images unmarshalled", async () => {
    const { ctx, calls } = fakeCtx([
      cancelled([
        {
          Code: "ConditionalCheckFailed",
          Item: { status: { S: "held" }, holdExpiresAt: { N: "12" }, seats: { L: [{ S: "A-1-1" }] } },
        },
        { Code: "TransactionConflict" },
        { Code: "ConditionalCheckFailed" },
      ]),
    ]);
    expect(await transact(ctx, [item, item, item])).toEqual({
      ok: false,
      contention: false,
      reasons: [
        { code: "ConditionalCheckFailed", item: { status: "held", holdExpiresAt: 12, seats: ["A-1-1"] } },
        { code: "TransactionConflict", item: undefined },
        { code: "ConditionalCheckFailed", item: undefined },
      ],
    });
    expect(calls()).toBe(1);
  });

  it("turns anything else into InventoryUnavailableError", async () => {
    const { ctx } = fakeCtx([Object.assign(new Error("slow down"), { name: "ThrottlingException" })]);
    await expect(transact(ctx, [item])).rejects.toBeInstanceOf(InventoryUnavailableError);
    const { ctx: v } = fakeCtx([cancelled([{ Code: "ValidationError" }])]);
    await expect(transact(v, [item])).rejects.toBeInstanceOf(InventoryUnavailableError);
  });

  it("reads a single write's failed condition and its old image", () => {
    const err = Object.assign(new Error("failed"), {
      name: "ConditionalCheckFailedException",
      Item: { status: { S: "sold" }, ok: { BOOL: true }, n: { NULL: true }, m: { M: { x: { N: "1.5" } } } },
    });
    expect(conditionFailure(err)).toEqual({ item: { status: "sold", ok: true, n: null, m: { x: 1.5 } } });
    expect(conditionFailure(Object.assign(new Error("x"), { name: "ConditionalCheckFailedException" }))).toEqual({
      item: undefined,
    });
    expect(conditionFailure(new Error("other"))).toBeNull();
    expect(fromAttributeMap({ s: { SS: ["a"] } })).toEqual({ s: new Set(["a"]) });
  });
});
