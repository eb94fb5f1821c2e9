/**
 * Relays an event's seat changes from Redis pub/sub to this instance's Server-Sent Events
 * clients. One subscriber connection per process; a channel is subscribed while at least one
 * local client watches that event, so ten thousand browsers cost Redis one subscription.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../logger.js";
import { seatMapKeys } from "./cache.js";

export interface SeatChange {
  id: string;
  status: "available" | "held" | "sold";
}

export type SeatListener = (changes: SeatChange[]) => void;

export interface SeatChangeRelay {
  /** Starts delivering the event's changes to `listener`; returns the function that stops it. */
  watch(eventId: string, listener: SeatListener): Promise<() => void>;
  /** Number of local watchers, for metrics and tests. */
  watchers(): number;
  close(): Promise<void>;
}

export function createSeatChangeRelay(subscriber: Redis, logger: Logger): SeatChangeRelay {
  const listeners = new Map<string, Set<SeatListener>>();

  subscriber.on("message", (channel: string, message: string) => {
    const set = listeners.get(channel);
    if (!set || set.size === 0) return;
    let changes: SeatChange[];
    try {
      changes = JSON.parse(message) as SeatChange[];
    } catch {
      logger.warn({ channel }, "ignoring a malformed seat-change message");
      return;
    }
    for (const listener of set) listener(changes);
  });

  return {
    async watch(eventId, listener) {
      const channel = seatMapKeys.channel(eventId);
      let set = listeners.get(channel);
      if (!set) {
        set = new Set();
        listeners.set(channel, set);
      }
      set.add(listener);
      if (set.size === 1) await subscriber.subscribe(channel);
      return () => {
        const current = listeners.get(channel);
        if (!current) return;
        current.delete(listener);
        if (current.size === 0) {
          listeners.delete(channel);
          subscriber.unsubscribe(channel).catch(() => {});
        }
      };
    },
    watchers: () => [...listeners.values()].reduce((n, s) => n + s.size, 0),
    async close() {
      listeners.clear();
      subscriber.disconnect();
    },
  };
}
