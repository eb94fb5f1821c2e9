/**
 * The seat-map cache in Redis: per section, one status character per seat (`a`vailable,
 * `h`eld, `s`old) plus a version, loaded from DynamoDB on a miss and updated write-through on
 * every state change. Every change is also published on the event's channel, which each gateway
 * instance relays to its Server-Sent Events clients.
 *
 * It may lag the truth by a few seconds. It is never consulted to decide who owns a seat.
 *
 * Versions (the ETag) are `<generation>.<counter>`: every fill draws a random 64-bit generation,
 * so a section loaded again after Redis lost its data never repeats a version served before the
 * loss, and an old If-None-Match cannot get a false 304.
 *
 * While Redis is down, `sectionFromStore` and `availabilityFromStore` read DynamoDB directly: one
 * load per section at a time in this process (single flight), kept in memory for a moment, so a
 * crowd of readers does not become a crowd of DynamoDB queries. Their versions start with `db.`.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import { redisReady, requireRedis, trackRedis } from "../redis/availability.js";
import { codeTable, type RedisClient, registerScripts, scriptFamily } from "../redis/scripts.js";
import { ttlCache } from "../ttl-cache.js";

export type SeatStatus = "available" | "held" | "sold";

export interface SeatRow {
  id: string;
  status: SeatStatus;
  /**
   * Epoch ms: a held seat's hold expiry; on an available seat, the expiry of a hold that lapsed and
   * is not swept yet (the fill keeps it in the section's expiries, where the sweep finds it).
   */
  holdExpiresAt?: number | undefined;
}

/** Where a section is loaded from on a miss: the authoritative store. */
export interface SectionSource {
  /** `consistent`: a strongly consistent read (a fill needs every write that answered before it). */
  loadSection(eventId: string, sectionId: string, options?: { consistent?: boolean }): Promise<SeatRow[] | null>;
  /** Available seats of a section, cheaper than loading it (optional: counted from loadSection). */
  countAvailable?(eventId: string, sectionId: string): Promise<number>;
}

/** How long a direct read of the store is served from memory while Redis is down. */
export const STORE_READ_TTL_MS = 2_000;

/**
 * How long a fill (a read of the section from the store, then its write to Redis) may take. While
 * one is open, changes applied to the section are journaled for it to replay; a fill that takes
 * longer writes nothing (seatmap-load-7.lua), and the section is read again on the next miss.
 */
export const FILL_WINDOW_MS = 10_000;

export interface CachedSection {
  sectionId: string;
  /** Opaque; changes whenever any seat of the section changes. Used as the ETag. */
  version: string;
  seats: { id: string; status: SeatStatus }[];
  /**
   * Held seat id -> its hold's expiry (epoch ms), as the shield reads it (a hold past it is a free
   * seat to the claim path); absent when not read. Not part of the section's bodies.
   */
  heldUntil?: ReadonlyMap<string, number>;
}

export type ShieldResult =
  | { kind: "leased"; owner: string; release(): Promise<void> }
  | { kind: "bypass"; release(): Promise<void> }
  | { kind: "lost"; seats: string[] };

// The names are the metrics' `script` labels.
const seatMapScripts = scriptFamily({
  name: "seat-map",
  files: {
    seatmapFillBegin: "seatmap-fill-begin-2",
    seatmapLoad: "seatmap-load-7",
    seatmapApply: "seatmap-apply-8",
    shield: "shield-n",
    leaseRelease: "lease-release-n",
  },
});

/** The first element of shield-n.lua's reply. */
const SHIELD_CODES = codeTable("shield", { 1: "leased", 2: "not_cached", 0: "lost" });
/** seatmap-load-7.lua's reply. */
const LOAD_CODES = codeTable("seatmap-load", { 1: "filled", 0: "cached", [-1]: "uncovered" });

/** A fill wrote the section; the store has no such section; or the journal could not cover the fill. */
type FillOutcome = "filled" | "missing" | "uncovered";

const statusChar: Record<SeatStatus, string> = { available: "a", held: "h", sold: "s" };
const charStatus: Record<string, SeatStatus> = { a: "available", h: "held", s: "sold" };

export const seatMapKeys = {
  section(eventId: string, sectionId: string) {
    const base = `sm:{evt:${eventId}}:sec:${sectionId}`;
    return {
      st: `${base}:st`,
      idx: `${base}:idx`,
      exp: `${base}:exp`,
      meta: `${base}:meta`,
      journal: `${base}:jr`,
      fill: `${base}:fill`,
    };
  },
  availability: (eventId: string) => `sm:{evt:${eventId}}:avail`,
  channel: (eventId: string) => `seatmap:{evt:${eventId}}`,
  lease: (eventId: string, seatId: string) => `lease:{evt:${eventId}}:${seatId}`,
};

/** A seat id is `<section>-<row>-<number>`; section ids contain no dash. */
export function sectionOf(seatId: string): string {
  const dash = seatId.indexOf("-");
  return dash === -1 ? seatId : seatId.slice(0, dash);
}

/** A section's cached statuses, one character a seat (`a`, `h`, `s`) in the order of `ids`. */
export interface SectionStatuses {
  version: string;
  ids: readonly string[];
  statuses: string;
}

export interface SeatMapCache {
  /** The section from cache, loading it from the source on a miss; null when it does not exist. */
  getSection(eventId: string, sectionId: string): Promise<CachedSection | null>;
  /**
   * The section's statuses as one string (`getSection` without a seat object each), loading it on
   * a miss; null when it does not exist. For the best-available proposal, which reads every
   * section a request allows: the ids are read again only when a fill has changed them.
   */
  statuses(eventId: string, sectionId: string): Promise<SectionStatuses | null>;
  /** The cached version of a section (one small read), or null when it is not cached. */
  version(eventId: string, sectionId: string): Promise<string | null>;
  /** Write-through after DynamoDB answered; also publishes the changes. */
  apply(eventId: string, changes: SeatRow[]): Promise<void>;
  /** Rebuilds a section from the source (cache-refresh worker, or a version in doubt). */
  rebuild(eventId: string, sectionId: string): Promise<boolean>;
  /** Available seats per cached section (the event summary). */
  availability(eventId: string): Promise<Record<string, number>>;
  /**
   * Held seat id -> hold expiry (epoch ms) of each of `sectionIds` the cache has (one round trip);
   * a section it does not have is absent. The sweeper's candidates (src/inventory/sweep.ts):
   * never more than that, a seat goes back only by a condition on its item.
   */
  heldUntil(eventId: string, sectionIds: readonly string[]): Promise<Map<string, Map<string, number>>>;
  /** The hot-seat shield: filters holds that cannot win and leases the seats of one that can. */
  shield(eventId: string, seatIds: string[], leaseMs: number): Promise<ShieldResult>;
  /** A section read from the store, bypassing Redis (when it is down); null when it does not exist. */
  sectionFromStore(eventId: string, sectionId: string): Promise<CachedSection | null>;
  /** Available seats per section from the store, bypassing Redis (when it is down). */
  availabilityFromStore(eventId: string, sectionIds: readonly string[]): Promise<Record<string, number>>;
  /** True when the cache may be asked now (Redis connected); false means every call fails at once. */
  ready(): boolean;
  /**
   * Calls `listener` each time this process has written sections of the cache (an apply, a fill, a
   * rebuild), once the write has answered or failed, so a copy kept in memory (src/seatmap/pages.ts)
   * drops what it holds before the writer's next read. Returns the unsubscriber.
   */
  onWrite(listener: (eventId: string, sectionIds: readonly string[]) => void): () => void;
}

export function createSeatMapCache(deps: {
  redis: RedisClient;
  source: SectionSource;
  metrics: Metrics;
  logger: Logger;
  /**
   * Publish changes with SPUBLISH (sharded pub/sub, on a Redis Cluster) instead of PUBLISH; the
   * relay must subscribe with the same kind (src/seatmap/relay.ts). Default false.
   */
  shardedPubSub?: boolean;
}): SeatMapCache {
  const { redis, source, metrics } = deps;
  trackRedis(redis);
  const writeListeners = new Set<(eventId: string, sectionIds: readonly string[]) => void>();
  const wrote = (eventId: string, sectionIds: readonly string[]) => {
    for (const listener of writeListeners) {
      try {
        listener(eventId, sectionIds);
      } catch (err) {
        deps.logger.warn({ err: (err as Error).message }, "a seat-map write listener failed");
      }
    }
  };
  const run = registerScripts(redis, seatMapScripts);
  const publish = deps.shardedPubSub ? "SPUBLISH" : "PUBLISH";

  const script = async <T>(name: keyof typeof seatMapScripts.files, keys: string[], args: (string | number)[]) => {
    requireRedis(redis, name);
    try {
      const out = await run<T>(name, keys, args);
      metrics.redisScripts.inc({ script: name, outcome: "ok" });
      return out;
    } catch (err) {
      metrics.redisScripts.inc({ script: name, outcome: "error" });
      throw err;
    }
  };

  /**
   * Reads the section from the store and writes it to Redis. The fill is opened first: changes
   * applied while the store is read are journaled and replayed on top (seatmap-fill-begin-2.lua),
   * so a seat sold during the read is not cached as it was before. The read is strongly
   * consistent, so it holds every write that answered before the fill opened.
   */
  async function fill(eventId: string, sectionId: string, force: boolean): Promise<FillOutcome> {
    try {
      return await fillSection(eventId, sectionId, force);
    } finally {
      wrote(eventId, [sectionId]);
    }
  }

  async function fillSection(eventId: string, sectionId: string, force: boolean): Promise<FillOutcome> {
    const k = seatMapKeys.section(eventId, sectionId);
    const start = await script<string>("seatmapFillBegin", [k.journal, k.fill], [FILL_WINDOW_MS]);
    const rows = await source.loadSection(eventId, sectionId, { consistent: true });
    if (!rows) return "missing";
    // Held seats with their expiry; an available seat whose lapsed hold is not swept yet with that
    // hold's (the shield and the pages read an expiry only for a seat shown held; the sweep reads
    // every one: a rebuild must not hide the seat from it until the sections' backstop).
    const held = rows.flatMap((r) =>
      r.status === "held"
        ? [r.id, String(r.holdExpiresAt ?? 0)]
        : r.status === "available" && r.holdExpiresAt !== undefined
          ? [r.id, String(r.holdExpiresAt)]
          : [],
    );
    const filled = await script<number>(
      "seatmapLoad",
      [k.st, k.idx, k.exp, k.meta, seatMapKeys.availability(eventId), k.journal, k.fill],
      [
        force ? 1 : 0,
        randomBytes(8).toString("hex"),
        sectionId,
        rows.map((r) => r.id).join(","),
        rows.map((r) => statusChar[r.status]).join(""),
        start,
        FILL_WINDOW_MS,
        ...held,
      ],
    );
    if (LOAD_CODES.outcome(filled) === "uncovered") {
      deps.logger.warn({ eventId, sectionId }, "seat-map fill outlasted its journal; not cached");
      return "uncovered";
    }
    return "filled";
  }

  async function read(eventId: string, sectionId: string): Promise<CachedSection | null> {
    const k = seatMapKeys.section(eventId, sectionId);
    requireRedis(redis, "seat-map read");
    const result = await redis.multi().hmget(k.meta, "gen", "v", "ids").get(k.st).hgetall(k.exp).exec();
    if (!result) return null;
    const [metaResult, stResult, expResult] = result;
    const meta = metaResult?.[1] as (string | null)[] | undefined;
    const st = stResult?.[1] as string | null | undefined;
    const exp = (expResult?.[1] ?? {}) as Record<string, string>;
    const [gen, v, ids] = meta ?? [];
    if (!gen || !v || ids == null || st == null) return null;
    const seatIds = ids === "" ? [] : ids.split(",");
    return {
      sectionId,
      version: `${gen}.${v}`,
      seats: seatIds.map((id, i) => ({ id, status: charStatus[st[i] ?? "a"] ?? "available" })),
      heldUntil: new Map(Object.entries(exp).map(([id, ms]) => [id, Number(ms)])),
    };
  }

  // A section's ids change only with a fill, which draws a new generation: kept by generation.
  const idsByGeneration = new Map<string, { gen: string; ids: readonly string[] }>();
  async function readStatuses(eventId: string, sectionId: string): Promise<SectionStatuses | null> {
    const k = seatMapKeys.section(eventId, sectionId);
    const key = `${eventId}/${sectionId}`;
    requireRedis(redis, "seat-map read");
    const known = idsByGeneration.get(key);
    const out = await redis.multi().hmget(k.meta, "gen", "v").get(k.st).exec();
    const [gen, v] = (out?.[0]?.[1] as (string | null)[] | undefined) ?? [];
    const st = out?.[1]?.[1] as string | null | undefined;
    if (!gen || !v || st == null) return null;
    if (known?.gen === gen) return { version: `${gen}.${v}`, ids: known.ids, statuses: st };
    const full = await read(eventId, sectionId);
    if (!full) return null;
    const ids = full.seats.map((s) => s.id);
    if (idsByGeneration.size > 1_000) idsByGeneration.clear();
    idsByGeneration.set(key, { gen: full.version.split(".")[0] ?? "", ids });
    return { version: full.version, ids, statuses: full.seats.map((s) => statusChar[s.status]).join("") };
  }

  // Keys are `<eventId>/<sectionId>` (ids never contain '/').
  const storeSections = ttlCache<CachedSection | null>(STORE_READ_TTL_MS, async (key) => {
    const [eventId = "", sectionId = ""] = key.split("/");
    const rows = await source.loadSection(eventId, sectionId);
    if (!rows) return null;
    return {
      sectionId,
      version: `db.${randomBytes(8).toString("hex")}`,
      seats: rows.map((r) => ({ id: r.id, status: r.status })),
      heldUntil: new Map(
        rows.flatMap((r) => (r.status === "held" && r.holdExpiresAt !== undefined ? [[r.id, r.holdExpiresAt]] : [])),
      ),
    };
  });
  const storeCounts = ttlCache<number>(STORE_READ_TTL_MS, async (key) => {
    const [eventId = "", sectionId = ""] = key.split("/");
    if (source.countAvailable) return source.countAvailable(eventId, sectionId);
    const rows = await source.loadSection(eventId, sectionId);
    return rows ? rows.filter((r) => r.status === "available").length : 0;
  });

  // A spike of first readers of a cold section makes one DynamoDB load per process, not thousands.
  const filling = new Map<string, Promise<FillOutcome>>();
  const fillOnce = (eventId: string, sectionId: string): Promise<FillOutcome> => {
    const key = `${eventId}/${sectionId}`;
    let pending = filling.get(key);
    if (!pending) {
      pending = fill(eventId, sectionId, false).finally(() => filling.delete(key));
      filling.set(key, pending);
    }
    return pending;
  };

  return {
    async getSection(eventId, sectionId) {
      const cached = await read(eventId, sectionId);
      if (cached) return cached;
      const filled = await fillOnce(eventId, sectionId);
      if (filled === "missing") return null;
      // A fill that could not be cached: this reader gets the store's answer.
      return (await read(eventId, sectionId)) ?? storeSections(`${eventId}/${sectionId}`);
    },

    async statuses(eventId, sectionId) {
      const cached = await readStatuses(eventId, sectionId);
      if (cached) return cached;
      const filled = await fillOnce(eventId, sectionId);
      if (filled === "missing") return null;
      const again = await readStatuses(eventId, sectionId);
      if (again) return again;
      const stored = await storeSections(`${eventId}/${sectionId}`);
      return stored
        ? {
            version: stored.version,
            ids: stored.seats.map((s) => s.id),
            statuses: stored.seats.map((s) => statusChar[s.status]).join(""),
          }
        : null;
    },

    async apply(eventId, changes) {
      const bySection = new Map<string, SeatRow[]>();
      for (const change of changes) {
        const section = sectionOf(change.id);
        bySection.set(section, [...(bySection.get(section) ?? []), change]);
      }
      await Promise.all(
        [...bySection].map(([sectionId, rows]) => {
          const k = seatMapKeys.section(eventId, sectionId);
          return script<number>(
            "seatmapApply",
            [
              k.st,
              k.idx,
              k.exp,
              k.meta,
              seatMapKeys.availability(eventId),
              seatMapKeys.channel(eventId),
              k.journal,
              k.fill,
            ],
            [
              sectionId,
              FILL_WINDOW_MS,
              publish,
              ...rows.flatMap((r) => [r.id, r.status, String(r.holdExpiresAt ?? 0)]),
            ],
            // A write whose answer was lost may still have happened: listeners hear of failures too.
          ).finally(() => wrote(eventId, [sectionId]));
        }),
      );
    },

    async version(eventId, sectionId) {
      requireRedis(redis, "seat-map version");
      const [gen, v] = await redis.hmget(seatMapKeys.section(eventId, sectionId).meta, "gen", "v");
      return gen && v ? `${gen}.${v}` : null;
    },

    rebuild: async (eventId, sectionId) => (await fill(eventId, sectionId, true)) === "filled",

    async availability(eventId) {
      requireRedis(redis, "seat-map availability");
      const raw = await redis.hgetall(seatMapKeys.availability(eventId));
      return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]));
    },

    async heldUntil(eventId, sectionIds) {
      requireRedis(redis, "seat-map held seats");
      const tx = redis.multi();
      for (const sectionId of sectionIds) {
        const k = seatMapKeys.section(eventId, sectionId);
        tx.exists(k.meta).hgetall(k.exp);
      }
      const out = (await tx.exec()) ?? [];
      const held = new Map<string, Map<string, number>>();
      sectionIds.forEach((sectionId, i) => {
        const [existsErr, exists] = out[2 * i] ?? [];
        const [expErr, exp] = out[2 * i + 1] ?? [];
        if (existsErr || expErr) throw existsErr ?? expErr;
        // Not cached (never read, or lost): the sweeper reads that section from DynamoDB.
        if (exists !== 1) return;
        held.set(
          sectionId,
          new Map(Object.entries((exp ?? {}) as Record<string, string>).map(([id, ms]) => [id, Number(ms)])),
        );
      });
      return held;
    },

    async shield(eventId, seatIds, leaseMs) {
      // Redis down: no filter, no lease; DynamoDB alone decides (and nothing waits for a reconnect).
      if (!redisReady(redis)) return { kind: "bypass", release: async () => {} };
      const owner = randomBytes(9).toString("base64url");
      const bySection = new Map<string, string[]>();
      for (const id of seatIds) {
        const section = sectionOf(id);
        bySection.set(section, [...(bySection.get(section) ?? []), id]);
      }
      const leased: string[] = [];
      const release = async () => {
        if (leased.length === 0) return;
        const keys = leased.map((id) => seatMapKeys.lease(eventId, id));
        await script<number>("leaseRelease", keys, [owner]).catch(() => {});
      };
      let bypass = false;
      for (const [sectionId, ids] of bySection) {
        const k = seatMapKeys.section(eventId, sectionId);
        const keys = [k.st, k.idx, k.exp, ...ids.map((id) => seatMapKeys.lease(eventId, id))];
        const shieldOnce = async () => {
          const [code, ...lost] = await script<(number | string)[]>("shield", keys, [leaseMs, owner, ...ids]);
          return { answer: SHIELD_CODES.outcome(code), lost };
        };
        let out = await shieldOnce();
        // A cold section is loaded once (per process) and checked again, so the first spike on
        // an event is filtered too instead of reaching DynamoDB in full.
        if (out.answer === "not_cached" && (await fillOnce(eventId, sectionId).catch(() => "failed")) === "filled")
          out = await shieldOnce();
        if (out.answer === "lost") {
          await release();
          metrics.shieldRejections.inc();
          return { kind: "lost", seats: out.lost.map(String) };
        }
        if (out.answer === "not_cached") bypass = true;
        else leased.push(...ids);
      }
      return bypass && leased.length === 0 ? { kind: "bypass", release } : { kind: "leased", owner, release };
    },

    sectionFromStore: (eventId, sectionId) => storeSections(`${eventId}/${sectionId}`),

    ready: () => redisReady(redis),

    onWrite(listener) {
      writeListeners.add(listener);
      return () => writeListeners.delete(listener);
    },

    async availabilityFromStore(eventId, sectionIds) {
      const counts = await Promise.all(sectionIds.map((sectionId) => storeCounts(`${eventId}/${sectionId}`)));
      return Object.fromEntries(sectionIds.map((id, i) => [id, counts[i] ?? 0]));
    },
  };
}
