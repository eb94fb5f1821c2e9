/**
 * The open purchases of an event (GSI3, KEYS_ONLY, sharded like the old purchases index): pending,
 * confirmed and not yet acknowledged, or failed with a refund under way. The index holds only
 * their keys, so a reader lists the keys of every shard and reads the items by key (BatchGetItem).
 * In the usual case the index is nearly empty: a purchase is in it from its creation until its
 * booking is acknowledged, a few seconds. Its readers (the reconciler, the outbox publisher, the
 * counts, the audit) filter what they read by the item's own state, which is the truth: the index
 * is eventually consistent and may still list a purchase a moment after it left.
 */
import { BatchGetCommand } from "@aws-sdk/lib-dynamodb";
import { GSI3 } from "../dynamodb/table.js";
import { type ItemKey, keys, PURCHASE_SHARD_LIST } from "./keys.js";
import { backoff, type Ctx, type Item, mapLimit, queryPages } from "./store.js";

/** The event's open purchases, read by key (eventually consistent unless `consistent`). */
export async function readOpenPurchases(
  ctx: Ctx,
  eventId: string,
  options: { consistent?: boolean } = {},
): Promise<Item[]> {
  const found = await Promise.all(
    PURCHASE_SHARD_LIST.map(async (shard) => {
      const out: Item[] = [];
      for await (const page of queryPages(ctx, {
        IndexName: GSI3,
        KeyConditionExpression: "GSI3PK = :pk",
        ExpressionAttributeValues: { ":pk": keys.openPurchasesPartition(eventId, shard) },
      })) {
        for (const item of page.Items ?? []) out.push({ PK: item.PK, SK: item.SK });
      }
      return out;
    }),
  );
  const items = await readPurchasesByKey(ctx, found.flat(), options);
  // Oldest first, as the index sorts them (within a shard).
  return items.sort((a, b) => String(a.createdAt ?? "").localeCompare(String(b.createdAt ?? "")));
}

/** Items by key, 100 to a BatchGetItem, 4 in flight; unprocessed keys asked again with backoff. */
export async function readPurchasesByKey(
  ctx: Ctx,
  wanted: readonly (Item | ItemKey)[],
  options: { consistent?: boolean } = {},
): Promise<Item[]> {
  const batches: (Item | ItemKey)[][] = [];
  for (let i = 0; i < wanted.length; i += 100) batches.push(wanted.slice(i, i + 100));
  const items: Item[] = [];
  await mapLimit(batches, 4, async (batch) => {
    let todo: Item[] = batch.map((k) => ({ PK: k.PK, SK: k.SK }));
    for (let attempt = 0; todo.length > 0; attempt++) {
      if (attempt > 8) throw new Error(`${todo.length} keys left unprocessed`);
      if (attempt > 0) await backoff(attempt, 20, 1_000);
      const out = await ctx.doc.send(
        new BatchGetCommand({
          RequestItems: { [ctx.tableName]: { Keys: todo, ...(options.consistent ? { ConsistentRead: true } : {}) } },
        }),
      );
      items.push(...(out.Responses?.[ctx.tableName] ?? []));
      todo = (out.UnprocessedKeys?.[ctx.tableName]?.Keys as Item[] | undefined) ?? [];
    }
  });
  return items;
}
