/** Shared setup of the inventory tests: a table of their own, a client, a clock they move. */
import { randomUUID } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { inject } from "vitest";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createInventory, type EventInput, type Inventory } from "../../src/inventory/index.js";
import { createTestDynamoClient } from "../support/dynamo.js";

export interface ManualClock {
  now: () => number;
  advance: (ms: number) => void;
  set: (ms: number) => void;
}

export function manualClock(start = Date.parse("2030-01-01T00:00:00.000Z")): ManualClock {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
    set: (ms) => {
      t = ms;
    },
  };
}

export interface InventoryFixture {
  client: DynamoDBClient;
  tableName: string;
  clock: ManualClock;
  inventory: Inventory;
  /** Another instance on the same table and clock, as a second gateway would be. */
  newInstance: (clock?: ManualClock) => Inventory;
  /**
   * `n` gateways, each with its own client and connection pool (64 sockets, as a gateway would
   * have), so a race is many in-flight requests without one client opening 1,000 sockets at once.
   */
  gateways: (n: number) => Inventory[];
  close: () => void;
}

export async function setupInventory(name: string): Promise<InventoryFixture> {
  const endpoint = inject("dynamoEndpoint");
  const client = createTestDynamoClient(endpoint);
  const extra: DynamoDBClient[] = [];
  const tableName = `inv_${name}_${randomUUID().slice(0, 8)}`;
  await ensureTable(client, tableName);
  const clock = manualClock();
  return {
    client,
    tableName,
    clock,
    inventory: createInventory({ client, tableName, clock: clock.now }),
    newInstance: (c = clock) => createInventory({ client, tableName, clock: c.now }),
    gateways: (n) =>
      Array.from({ length: n }, () => {
        const own = createDynamoClient({
          endpoint,
          region: "us-east-1",
          maxSockets: 64,
          maxAttempts: 1,
          // A thousand requests queue behind 64 sockets; on a busy two-core box that takes seconds,
          // and the SDK counts the wait for a socket against the connection timeout (10 s by
          // default: "socket did not establish a connection" in two CI runs).
          requestTimeoutMs: 60_000,
          connectionTimeoutMs: 60_000,
        });
        extra.push(own);
        return createInventory({ client: own, tableName, clock: clock.now });
      }),
    close: () => {
      client.destroy();
      for (const c of extra) c.destroy();
    },
  };
}

let counter = 0;
export function uniqueEventId(prefix: string): string {
  counter++;
  return `${prefix}_${counter}_${randomUUID().replaceAll("-", "").slice(0, 8)}`.slice(0, 32);
}

/** An event already on sale at `clock.now()` unless told otherwise. */
export function eventInput(clock: ManualClock, overrides: Partial<EventInput> = {}): EventInput {
  return {
    name: "Finals Night",
    onSaleAt: new Date(clock.now() - 60_000).toISOString(),
    holdSeconds: 480,
    maxSeatsPerFan: 8,
    sections: [{ id: "A", tier: "Floor", price: 15_000, rows: 4, seatsPerRow: 5 }],
    generalAdmission: [{ id: "GA", tier: "Standing", price: 6_000, capacity: 10 }],
    waitingRoom: { admitPerSecond: 50, maxActive: 2_000, sessionSeconds: 900 },
    ...overrides,
  };
}

/**
 * Polls `read` until `check` stops throwing (or the deadline passes, then its last error). For what
 * comes from a global secondary index, which real DynamoDB updates eventually, not at once.
 */
export async function eventually<T>(read: () => Promise<T>, check: (value: T) => void, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    const value = await read();
    try {
      check(value);
      return value;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, Math.min(200, 10 * 2 ** attempt)));
    }
  }
}
