/** The inventory module's public surface. Nothing SDK-shaped passes through here. */
export {
  createInventory,
  type EventStore,
  type HoldStore,
  type Inventory,
  type InventoryOptions,
  type OutboxStore,
  type PurchaseStore,
  type SeatReads,
} from "./inventory.js";
export {
  type BestCheck,
  type BestPlan,
  type BestRequest,
  type Block,
  checkedBlock,
  choose,
  proposals,
  rankBlocks,
  rankSplitBlocks,
  SectionView,
  strandedInRow,
} from "./best.js";
export type { CheckedSeatHold, NextSeats } from "./holds.js";
export { MAX_SEATS_PER_FAN, MAX_SEATS_PER_HOLD, TRANSACTION_MAX_ITEMS } from "./limits.js";
export { DEFAULT_REQUEST_BUDGET_MS, EVENT_CACHE_MS } from "./events.js";
export { parseSeatId, REFUND_DUE, seatIdOf, shardOf, SWEEP_SHARDS, type SeatRef } from "./keys.js";
export type { SeatPageOptions } from "./reads.js";
export { eventInputSchema, MAX_SEATS_PER_EVENT, parseEventInput } from "./schema.js";
export * from "./types.js";
