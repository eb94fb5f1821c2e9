/**
 * The gateway's defaults and the adapters between its modules: the seat-map cache and the waiting
 * room each define the small interface they load from, adapted to the inventory here. Everything
 * is built from them in src/services.ts.
 */
import { createHmac } from "node:crypto";
import type { GatewayLimits } from "./http/context.js";
import type { Inventory, OperatorRoomSettings } from "./inventory/index.js";
import type { SeatRow } from "./seatmap/cache.js";
import type { DecisionStore } from "./decisions/store.js";
import type { BotSettings, RestoreInput, RoomSettings } from "./waiting-room/types.js";

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
            ...(s.lapsedHoldExpiresAt ? { holdExpiresAt: Date.parse(s.lapsedHoldExpiresAt) } : {}),
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
 * The settings kept beside the rates (roomKeeper stores them in the same map): the bot settings,
 * the admission loop's, and the version the restored room numbers its next change above.
 */
function botSettingsOf({ powBits, invites, autoAdmit, version }: OperatorRoomSettings): BotSettings {
  return {
    ...(powBits !== undefined ? { powBits } : {}),
    ...(invites !== undefined ? { invites } : {}),
    ...(autoAdmit !== undefined ? { autoAdmit } : {}),
    ...(version !== undefined ? { settingsVersion: version } : {}),
  };
}

/**
 * Where the waiting room keeps its settings after each change (the operator's, the admission
 * loop's): on the event item, for roomSource. `closed` is kept as itself: a closed room comes back
 * closed, and an un-pause does not reopen it.
 */
export function roomKeeper(inventory: Inventory) {
  return (eventId: string, s: RoomSettings, version: number) =>
    inventory.events.saveRoomSettings({
      eventId,
      settings: {
        admitPerSecond: s.admitPerSecond,
        maxActive: s.maxActive,
        sessionSeconds: s.sessionSeconds,
        abandonSeconds: s.abandonSeconds,
        paused: s.paused,
        closed: s.closed,
        powBits: s.powBits,
        invites: s.invites,
        autoAdmit: s.autoAdmit,
        version,
      },
    });
}

/**
 * What a waiting room Redis lost is configured again from: the event item, once its layout is
 * complete: the operator's latest settings (every PATCH keeps them on the item, paused and closed
 * included), else those of its last PUT; and the fans the operator revoked (`records`).
 */
export function roomSource(inventory: Inventory, records?: Pick<DecisionStore, "revokedFans">) {
  return async (eventId: string): Promise<RestoreInput | null> => {
    const [event, revoked] = await Promise.all([
      inventory.events.get({ eventId }),
      records ? records.revokedFans(eventId) : Promise.resolve([]),
    ]);
    if (!event?.layoutComplete) return null;
    // The fans the operator revoked are refused a place in the room that comes back.
    const refused = revoked.length > 0 ? { revoked } : {};
    // The operator's latest settings when there are any (PATCH keeps them on the event), else the PUT's.
    const operator = event.roomSettings;
    return operator
      ? {
          ...refused,
          onSaleAt: event.onSaleAt,
          admitPerSecond: operator.admitPerSecond,
          maxActive: operator.maxActive,
          sessionSeconds: operator.sessionSeconds,
          abandonSeconds: operator.abandonSeconds,
          paused: operator.paused,
          ...(operator.closed === undefined ? {} : { closed: operator.closed }),
          ...botSettingsOf(operator),
        }
      : { ...refused, onSaleAt: event.onSaleAt, ...event.waitingRoom };
  };
}
