/**
 * The gateway's defaults and the adapters between its modules: the seat-map cache and the waiting
 * room each define the small interface they load from, adapted to the inventory here. Everything
 * is built from them in src/services.ts.
 */
import { createHmac } from "node:crypto";
import type { GatewayLimits } from "./http/context.js";
import type { Inventory, OperatorRoomSettings } from "./inventory/index.js";
import type { SeatRow } from "./seatmap/cache.js";
import type { BotSettings } from "./waiting-room/types.js";

/** The default webhook secret: derived, so the simulated provider and the gateway agree. */
export function derivedWebhookSecret(gatewaySecret: string): string {
  return createHmac("sha256", gatewaySecret).update("payment-webhook").digest("base64url");
}

export const defaultLimits: GatewayLimits = {
  ratePerIp: 50,
  ratePerFan: 5,
  ratePerOperatorIp: 20,
  trustProxy: false,
  maxBodyBytes: 16 * 1024,
  maxStreams: 10_000,
  maxStreamsPerIp: 50,
  streamBacklogBytes: 64 * 1024,
  streamWriteTimeoutMs: 30_000,
};

/** The seat-map cache loads a section from the authoritative store, page by page. */
export function sectionSource(inventory: Inventory) {
  return {
    async loadSection(
      eventId: string,
      sectionId: string,
      options: { consistent?: boolean } = {},
    ): Promise<SeatRow[] | null> {
      const event = await inventory.events.get({ eventId });
      if (!event?.sections.some((s) => s.id === sectionId)) return null;
      const rows: SeatRow[] = [];
      let cursor: string | undefined;
      do {
        const page = await inventory.seats.listSection({
          eventId,
          sectionId,
          ...options,
          ...(cursor === undefined ? {} : { cursor }),
        });
        if (!page) return null;
        for (const s of page.seats) {
          rows.push({
            id: s.id,
            status: s.status,
            ...(s.holdExpiresAt ? { holdExpiresAt: Date.parse(s.holdExpiresAt) } : {}),
          });
        }
        cursor = page.nextCursor;
      } while (cursor);
      return rows;
    },
    countAvailable: (eventId: string, sectionId: string) => inventory.seats.countAvailable({ eventId, sectionId }),
  };
}

/**
 * The bot settings kept with the operator's (the PATCH stores them in the same map). The store's
 * reader (src/inventory/items.ts) has to pass them through for them to reach here; until it does
 * they read as absent, and the restored room has them off.
 */
function botSettingsOf({ powBits, invites, autoAdmit }: OperatorRoomSettings): BotSettings {
  return {
    ...(powBits !== undefined ? { powBits } : {}),
    ...(invites !== undefined ? { invites } : {}),
    ...(autoAdmit !== undefined ? { autoAdmit } : {}),
  };
}

/**
 * What a waiting room Redis lost is configured again from: the event item, once its layout is
 * complete: the operator's latest settings (every PATCH keeps them on the item, paused included),
 * else those of its last PUT.
 */
export function roomSource(inventory: Inventory) {
  return async (eventId: string) => {
    const event = await inventory.events.get({ eventId });
    if (!event?.layoutComplete) return null;
    // The operator's latest settings when there are any (PATCH keeps them on the event), else the PUT's.
    const operator = event.roomSettings;
    return operator
      ? {
          onSaleAt: event.onSaleAt,
          admitPerSecond: operator.admitPerSecond,
          maxActive: operator.maxActive,
          sessionSeconds: operator.sessionSeconds,
          abandonSeconds: operator.abandonSeconds,
          paused: operator.paused,
          ...botSettingsOf(operator),
        }
      : { onSaleAt: event.onSaleAt, ...event.waitingRoom };
  };
}
