/**
 * Relays an event's seat changes from Redis pub/sub to this instance's Server-Sent Events
 * clients. One subscriber connection per process; a channel is subscribed while at least one
 * local client watches that event, so ten thousand browsers cost Redis one subscription.
 *
 * When Redis goes away the streams stay open (heartbeats go on); ioredis subscribes the channels
 * again when it reconnects (autoResubscribe), and every watcher is told (`onResume`): changes
 * made meanwhile were not relayed, so a client should read the seat map again.
 *
 * On a Redis Cluster the relay uses sharded pub/sub (SSUBSCRIBE; the seat map publishes with
 * SPUBLISH, src/seatmap/cache.ts): an event's channel lives in the event's slot, so a change is
 * published by the shard that wrote it and reaches only the subscribers of that shard, instead of
 * being broadcast over the cluster bus to every node. ioredis (`shardedSubscribers`) keeps one
 * subscriber connection per master and subscribes the channels again when the slots move. A
 * failover does not close the Cluster object, so the loss and the return are read from its
 * subscriber group: a master's subscriber lost (`-node`) means changes may pass unseen
 * (`connected()` is false), and every new subscriber set after that (`subscribersReady`) resumes
 * the watchers, since changes the new master took before its subscription were not relayed.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../logger.js";
import { onRedisReconnect, redisReady, trackRedis } from "../redis/availability.js";
import type { RedisClient } from "../redis/scripts.js";
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

export function createSeatChangeRelay(subscriber: RedisClient, logger: Logger): SeatChangeRelay {
  const listeners = new Map<string, Map<SeatListener, WatchOptions>>();
  trackRedis(subscriber);
  const sharded = subscriber.isCluster;
  /** Sharded only: a master's subscriber was lost and no new subscriber set is up yet. */
  let shardLost = false;

  subscriber.on(sharded ? "smessage" : "message", (channel: string, message: string) => {
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
    (sharded ? subscriber.ssubscribe(channel) : subscriber.subscribe(channel)).catch((err: unknown) => {
      logger.warn({ err: (err as Error).message, channel }, "seat-change subscription failed");
    });
  const unsubscribe = (channel: string) =>
    (sharded ? subscriber.sunsubscribe(channel) : subscriber.unsubscribe(channel)).catch(() => {});
  const live = () => redisReady(subscriber) && !shardLost;

  const resume = () => {
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
  };
  // On a cluster a failover is followed through the subscriber group instead (followShards).
  const stopResuming = onRedisReconnect(subscriber, resume, { failovers: false });
  const stopFollowingShards = sharded
    ? followShards(subscriber as unknown as Redis, logger, {
        lost: () => {
          shardLost = true;
        },
        back: () => {
          shardLost = false;
          if (listeners.size > 0) resume();
        },
      })
    : () => {};

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
        if (live()) await subscribe(channel);
        else void subscribe(channel);
      }
      return () => {
        const current = listeners.get(channel);
        if (!current) return;
        current.delete(listener);
        if (current.size === 0) {
          listeners.delete(channel);
          void unsubscribe(channel);
        }
      };
    },
    watchers: () => {
      let n = 0;
      for (const watching of listeners.values()) for (const options of watching.values()) if (!options.internal) n++;
      return n;
    },
    connected: () => subscriber.status === "ready" && !shardLost,
    async close() {
      stopResuming();
      stopFollowingShards();
      listeners.clear();
      subscriber.disconnect();
    },
  };
}

/**
 * The sharded subscriber group of an ioredis Cluster: `lost` when a master's connection goes
 * (a replica's does not carry subscriptions), `back` on each new set of subscribers (ioredis
 * has subscribed the channels again on the masters it now knows; at start it is a no-op, nothing
 * is watched yet). Returns the unsubscriber.
 */
function followShards(
  cluster: Pick<Redis, "on" | "off">,
  logger: Logger,
  on: { lost: () => void; back: () => void },
): () => void {
  const onLost = (node: { options?: { readOnly?: boolean; host?: string; port?: number } } | undefined) => {
    if (node?.options?.readOnly) return;
    logger.warn(
      { node: node?.options ? `${node.options.host}:${node.options.port}` : undefined },
      "seat-change relay lost a cluster node; changes may pass unseen until it is replaced",
    );
    on.lost();
  };
  const onReady = () => on.back();
  cluster.on("-node", onLost);
  cluster.on("subscribersReady", onReady);
  return () => {
    cluster.off("-node", onLost);
    cluster.off("subscribersReady", onReady);
  };
}
