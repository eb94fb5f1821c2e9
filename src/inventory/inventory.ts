/**
 * The authoritative seat inventory on DynamoDB. `createInventory({client, tableName})` returns the
 * interface the gateway, the payment saga and the workers use: one small store per aggregate
 * (events, holds, purchases, the outbox) and the seat reads, each built by its module's factory
 * and taking one object argument, as electrodb's adapters do. A failed condition is an outcome,
 * returned as a value; only a store that cannot answer throws (InventoryUnavailableError).
 * docs/data-model.md explains the keys and why each operation is safe under any concurrency.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  createEventCache,
  createEventStore,
  DEFAULT_REQUEST_BUDGET_MS,
  EVENT_CACHE_MS,
  type EventStore,
} from "./events.js";
import { createHoldStore, type HoldStore } from "./holds.js";
import { createOutboxStore, type OutboxStore } from "./outbox.js";
import { createPurchaseStore, type PurchaseStore } from "./purchases.js";
import { createSeatReads, type SeatReads } from "./reads.js";
import { createCtx } from "./store.js";
import type { Clock } from "./types.js";

export interface InventoryOptions {
  client: DynamoDBClient;
  tableName: string;
  /** Epoch ms; defaults to Date.now. Every expiry decision uses it. */
  clock?: Clock;
  /** How long an on-sale event's layout is cached in this process (default 60 s; 0: never). */
  eventCacheMs?: number;
  /**
   * The longest one DynamoDB request may take, every attempt counted (default 5 s x 3). With the
   * event cache's life it sets how long before its on-sale an event can still be replaced.
   */
  requestBudgetMs?: number;
}

export interface Inventory {
  events: EventStore;
  holds: HoldStore;
  purchases: PurchaseStore;
  /** The BookingConfirmed outbox (./outbox.ts: unsent -> published -> acknowledged). */
  outbox: OutboxStore;
  seats: SeatReads;
}

export type { EventStore, HoldStore, OutboxStore, PurchaseStore, SeatReads };

export function createInventory(options: InventoryOptions): Inventory {
  const ctx = createCtx(options.client, options.tableName, options.clock ?? Date.now);
  const cache = createEventCache(ctx, options.eventCacheMs);
  // Every gateway caches an on-sale event this long (the default unless a test says otherwise).
  const replaceGuardMs =
    Math.max(options.eventCacheMs ?? 0, EVENT_CACHE_MS) + (options.requestBudgetMs ?? DEFAULT_REQUEST_BUDGET_MS);
  return {
    events: createEventStore(ctx, cache, replaceGuardMs),
    holds: createHoldStore(ctx, cache),
    purchases: createPurchaseStore(ctx, cache),
    outbox: createOutboxStore(ctx, cache),
    seats: createSeatReads(ctx),
  };
}
