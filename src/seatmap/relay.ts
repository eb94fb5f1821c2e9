/**
 * Relays an event's seat changes from Redis pub/sub to this instance's Server-Sent Events
 * clients. One subscriber connection per process; a channel is subscribed while at least one
 * local client watches that event, so ten thousand browsers cost Redis one subscription.
 *
 * When Redis goes away the streams stay open (heartbeats go on); ioredis subscribes the channels
 * again when it reconnects (autoResubscribe), and every watcher is told (`onResume`): changes
 * made meanwhile were not relayed, so a client should read the seat map again.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../logger.js";
import { onRedisReconnect, redisReady, trackRedis } from "../redis/availability.js";
import { seatMapKeys } from "./cache.js";

export interface SeatChange {
  id: string;
  status: "available" | "held" | "sold";
}

export type SeatListener = (changes: SeatChange[]) => void;

export interface WatchOptions {
  /** Called when the relay is connected again after losing Redis: changes may have been missed. */
  onResume?: () => void;
  /**
   * A watcher inside this process (the in-memory section pages), not a client: it shares the
   * event's one subscription but is not counted by `watchers()`, which counts clients' streams.
   */
  internal?: boolean;
}

export interface SeatChangeRelay {
  /** Starts delivering the event's changes to `listener`; returns the function that stops it. */
  watch(eventId: string, listener: SeatListener, options?: WatchOptions): Promise<() => void>;
  /** Number of local watchers (clients' streams, not `internal` ones), for metrics and tests. */
  watchers(): number;
  /**
   * True while the subscriber connection is up, so a change published now reaches the watchers.
   * While it is not, a change can pass unseen: whoever trusts the relay to hear of changes must not.
   */
  connected(): boolean;
  close(): Promise<void>;
}

export function createSeatChangeRelay(subscriber: Redis, logger: Logger): SeatChangeRelay {
  const listeners = new Map<string, Map<SeatListener, WatchOptions>>();
  trackRedis(subscriber);

  subscriber.on("message", (channel: string, message: string) => {
    const watching = listeners.get(channel);
    if (!watching || watching.size === 0) return;
    let changes: SeatChange[];
    try {
      changes = JSON.parse(message) as SeatChange[];
    } catch {
      logger.warn({ channel }, "ignoring a malformed seat-change message");
      return;
    }
    for (const listener of watching.keys()) listener(changes);
  });

  const subscribe = (channel: string) =>
    subscriber.subscribe(channel).catch((err: unknown) => {
      logger.warn({ err: (err as Error).message, channel }, "seat-change subscription failed");
    });

  const stopResuming = onRedisReconnect(subscriber, () => {
    logger.info({ channels: listeners.size }, "seat-change relay reconnected; streams told to read again");
    // autoResubscribe covers channels subscribed before the loss; a subscription asked for while
    // Redis was away may have failed. Subscribing again is harmless (no duplicate messages).
    for (const channel of listeners.keys()) void subscribe(channel);
    for (const watching of listeners.values()) {
      for (const options of watching.values()) {
        try {
          options.onResume?.();
        } catch (err) {
          logger.warn({ err: (err as Error).message }, "a seat-change watcher failed to resume");
        }
      }
    }
  });

  return {
    async watch(eventId, listener, options = {}) {
      const channel = seatMapKeys.channel(eventId);
      let watching = listeners.get(channel);
      if (!watching) {
        watching = new Map();
        listeners.set(channel, watching);
      }
      watching.set(listener, options);
      if (watching.size === 1) {
        // Connected: wait for the subscription, so the caller's "ready" means "live". Not
        // connected: ioredis sends it when Redis is back; the stream opens now and is resumed.
        if (redisReady(subscriber)) await subscribe(channel);
        else void subscribe(channel);
      }
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
    watchers: () => {
      let n = 0;
      for (const watching of listeners.values()) for (const options of watching.values()) if (!options.internal) n++;
      return n;
    },
    connected: () => subscriber.status === "ready",
    async close() {
      stopResuming();
      listeners.clear();
      subscriber.disconnect();
    },
  };
}
