/**
 * Section seat maps served from this process's memory: per (event, section) one page holding the
 * cached version and its bodies (JSON and compact, each identity, gzip and br), serialized and
 * compressed once per version, on first ask. Reading a section whose page is trusted costs no
 * Redis round trip, no serialization and no compression: a map lookup.
 *
 * When a page is trusted (served without asking Redis):
 * - the event's seat-change channel is subscribed through the relay (the one subscription per
 *   event per process the streams already use) and its subscriber connection is up, so every
 *   published change reaches us and drops the page of its section at once (stale by a pub/sub
 *   delivery, a millisecond or so);
 * - no write of this process to that section (src/seatmap/cache.ts `onWrite`: applies, fills,
 *   rebuilds) has answered since the page was read, so a fan who just held a seat reads it held;
 * - it was confirmed current less than `revalidateMs` ago. Writes that publish nothing (a rebuild
 *   by another process, a refill after Redis lost its data) are seen by this bound: past it, one
 *   small read of the version confirms the page or replaces it;
 * - Redis has not been seen down since it was read.
 * Otherwise the request reads Redis (one read per section at a time in this process; a request
 * that arrives after an invalidation never joins a read begun before it).
 *
 * The ETag is the version the page was read with, and every body of a page is serialized from
 * that one read, so a body is never served under another version's ETag: a change landing while
 * a page is compressed makes a new page, it does not alter the one being compressed.
 *
 * Redis down: pages come from DynamoDB through `sectionFromStore` (one load per section at a time,
 * kept 2 s, versions `db.<random>`), their bodies compressed once per load.
 *
 * Memory: at most `maxPages` pages (least recently read dropped first); an event's subscription
 * ends with its last page.
 */
import { brotliCompress, constants, gzip } from "node:zlib";
import type { Logger } from "../logger.js";
import { type CachedSection, type SeatMapCache, sectionOf } from "./cache.js";
import { type SectionFormat, sectionCompactJson, sectionJson } from "./formats.js";
import type { SeatChange, SeatChangeRelay } from "./relay.js";

export type { SectionFormat } from "./formats.js";
export type BodyEncoding = "identity" | "gzip" | "br";

/** How long a page is served without asking Redis when no change was heard of. */
export const PAGE_REVALIDATE_MS = 250;
/** Pages kept in memory per process (a 1,000-seat section's page is ~50 KB with every body). */
export const MAX_PAGES = 1_000;

export interface SectionPage {
  readonly version: string;
  /** `cache`: read from Redis; `store`: read from DynamoDB while Redis is down. */
  readonly source: "cache" | "store";
  /** The ETag of a format's bodies (quoted; the same for every encoding of that format). */
  etag(format: SectionFormat): string;
  /** A body; a compressed one is made on first ask (then kept), so the first may be a promise. */
  body(format: SectionFormat, encoding: BodyEncoding): Uint8Array | Promise<Uint8Array>;
  /**
   * Whether the page shows the seat sold, or held by a hold not yet expired at `now` (epoch ms): the
   * shield's rule, from this page (the hold's fast path refuses from it). False for an available
   * seat, a hold past its expiry and a seat the section does not have (the hold's own check refuses
   * that); undefined for a held seat whose expiry the page does not know.
   */
  taken(seatId: string, now: number): boolean | undefined;
  /** The section's seat ids, in the cached section's order. */
  readonly ids: readonly string[];
  /**
   * One character a seat of `ids`: `a` for a seat `taken` says is free at `now` (an expired hold
   * included), `h` for any other (held, sold, or held with an expiry the page does not know). What
   * a best-available proposal starts from (src/inventory/best.ts SectionView.fromStatuses).
   */
  statuses(now: number): string;
}

export type Compressor = (body: Uint8Array, encoding: Exclude<BodyEncoding, "identity">) => Promise<Uint8Array>;

export interface SectionPagesOptions {
  seatMap: Pick<SeatMapCache, "version" | "getSection" | "sectionFromStore" | "ready" | "onWrite">;
  relay: Pick<SeatChangeRelay, "watch" | "connected">;
  logger: Logger;
  revalidateMs?: number;
  maxPages?: number;
  /** Replaceable so a test can hold a compression open while a change lands. */
  compress?: Compressor;
}

export interface SectionPages {
  /** The section's current page, null when it does not exist; the page itself when trusted. */
  get(eventId: string, sectionId: string): SectionPage | null | Promise<SectionPage | null>;
  /**
   * The section's page when it is trusted in memory now, else null; never reads anything nor
   * starts a read (a caller that can do without the page: a best-available proposal).
   */
  peek(eventId: string, sectionId: string): SectionPage | null;
  /** Pages in memory, and events subscribed for them (tests, metrics). */
  stats(): { pages: number; events: number };
  close(): void;
}

/**
 * One compression at a time, still off the event loop. Concurrent zlib jobs run on every thread of
 * libuv's pool, and each thread's malloc arena keeps what its compressor touched: 64 jobs at once
 * left the process ~55 MiB larger, one at a time ~25 MiB, for the same work (a 37 KB body,
 * brotli 5 and gzip 9, 1,280 times each; a few tenths of a millisecond apiece).
 */
let compressing: Promise<unknown> = Promise.resolve();

/** gzip at 9 and brotli at 5: for these bodies (runs of one pattern) higher qualities buy little and cost much. */
export const compressBody: Compressor = (body, encoding) => {
  const next = compressing.then(() => compressNow(body, encoding));
  compressing = next.catch(() => undefined);
  return next;
};

const compressNow: Compressor = (body, encoding) =>
  new Promise((resolve, reject) => {
    const done = (err: Error | null, out: Buffer) => (err ? reject(err) : resolve(out));
    if (encoding === "gzip") gzip(body, { level: 9 }, done);
    else {
      brotliCompress(
        body,
        {
          params: {
            [constants.BROTLI_PARAM_QUALITY]: 5,
            [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
            [constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength,
          },
        },
        done,
      );
    }
  });

const FORMATS: readonly SectionFormat[] = ["json", "compact"];
const ENCODINGS: readonly BodyEncoding[] = ["identity", "gzip", "br"];

class Page implements SectionPage {
  /** Indexed `format * 3 + encoding`. */
  private readonly bodies: (Uint8Array | Promise<Uint8Array> | undefined)[] = [];
  private readonly etags: Record<SectionFormat, string>;
  private section: CachedSection | undefined;
  /**
   * The seats held or sold, each with when it is free again: Infinity sold, a held seat's expiry
   * (NaN: not known). Kept after the seats themselves go; small until the section sells.
   */
  private readonly takenSeats: Map<string, number>;
  readonly version: string;
  readonly ids: readonly string[];
  /** Where each seat id stands in `ids`, built on the first `statuses`. */
  private at: Map<string, number> | undefined;

  constructor(
    section: CachedSection,
    readonly source: "cache" | "store",
    private readonly compress: Compressor,
  ) {
    this.version = section.version;
    this.section = section;
    this.takenSeats = new Map();
    this.ids = section.seats.map((seat) => seat.id);
    for (const seat of section.seats) {
      if (seat.status === "sold") this.takenSeats.set(seat.id, Number.POSITIVE_INFINITY);
      else if (seat.status === "held") this.takenSeats.set(seat.id, section.heldUntil?.get(seat.id) ?? Number.NaN);
    }
    // A version has one dot (`<gen>.<n>`, `db.<hex>`): `.c` cannot make another version's tag.
    this.etags = { json: `"${section.version}"`, compact: `"${section.version}.c"` };
  }

  etag(format: SectionFormat): string {
    return this.etags[format];
  }

  taken(seatId: string, now: number): boolean | undefined {
    const freeAt = this.takenSeats.get(seatId);
    if (freeAt === undefined) return false;
    if (Number.isNaN(freeAt)) return undefined;
    return freeAt > now;
  }

  statuses(now: number): string {
    if (!this.at) this.at = new Map(this.ids.map((id, i) => [id, i]));
    const chars = new Uint8Array(this.ids.length).fill(97 /* a */);
    for (const [seatId, freeAt] of this.takenSeats) {
      // NaN (expiry unknown) compares false: taken, as the shield would not lease it either
      if (!(freeAt <= now)) {
        const i = this.at.get(seatId);
        if (i !== undefined) chars[i] = 104 /* h */;
      }
    }
    return Buffer.from(chars).toString("latin1");
  }

  body(format: SectionFormat, encoding: BodyEncoding): Uint8Array | Promise<Uint8Array> {
    const slot = FORMATS.indexOf(format) * 3 + ENCODINGS.indexOf(encoding);
    const kept = this.bodies[slot];
    if (kept) return kept;
    if (encoding === "identity") {
      const section = this.section as CachedSection;
      const identity = Buffer.from(format === "json" ? sectionJson(section) : sectionCompactJson(section));
      this.bodies[slot] = identity;
      // Both forms serialized: the seats themselves are no longer needed.
      if (this.bodies[0] && this.bodies[3]) this.section = undefined;
      return identity;
    }
    const identity = this.body(format, "identity") as Uint8Array;
    const pending = this.compress(identity, encoding).then(
      (compressed) => {
        this.bodies[slot] = compressed;
        return compressed;
      },
      (err: unknown) => {
        this.bodies[slot] = undefined;
        throw err;
      },
    );
    this.bodies[slot] = pending;
    return pending;
  }
}

interface Slot {
  readonly key: string;
  readonly eventId: string;
  readonly sectionId: string;
  /** Bumped by every invalidation of this section. */
  epoch: number;
  page: Page | undefined;
  /** The epoch and generation the page was read at, and when that read began. */
  pageEpoch: number;
  pageGeneration: number;
  checkedAt: number;
  loading: { epoch: number; generation: number; promise: Promise<Page | null> } | undefined;
}

interface EventWatch {
  /** The relay subscription answered: published changes of the event reach us. */
  live: boolean;
  slots: number;
  stop: (() => void) | undefined;
  closed: boolean;
}

export function createSectionPages(options: SectionPagesOptions): SectionPages {
  const { seatMap, relay, logger } = options;
  const revalidateMs = options.revalidateMs ?? PAGE_REVALIDATE_MS;
  const maxPages = options.maxPages ?? MAX_PAGES;
  const compress = options.compress ?? compressBody;

  /** Least recently read first. Keys `<eventId>/<sectionId>` (ids never contain '/'). */
  const slots = new Map<string, Slot>();
  let newest: Slot | undefined;
  const watches = new Map<string, EventWatch>();
  /** Bumped whenever Redis is seen down: nothing read before may be trusted after. */
  let generation = 0;
  /** Bodies of pages read from DynamoDB, one per load (sectionFromStore keeps a load 2 s). */
  const storePages = new WeakMap<CachedSection, Page>();

  const invalidate = (key: string) => {
    const slot = slots.get(key);
    if (slot) slot.epoch++;
  };
  const invalidateEvent = (eventId: string) => {
    for (const slot of slots.values()) if (slot.eventId === eventId) slot.epoch++;
  };
  const stopWrites = seatMap.onWrite((eventId, sectionIds) => {
    for (const sectionId of sectionIds) invalidate(`${eventId}/${sectionId}`);
  });

  const onChanges = (eventId: string, changes: SeatChange[]) => {
    let last = "";
    for (const change of changes) {
      const sectionId = sectionOf(change.id);
      if (sectionId === last) continue;
      last = sectionId;
      invalidate(`${eventId}/${sectionId}`);
    }
  };

  function watchEvent(eventId: string): void {
    let watch = watches.get(eventId);
    if (!watch) {
      const created: EventWatch = { live: false, slots: 0, stop: undefined, closed: false };
      watch = created;
      watches.set(eventId, created);
      relay
        .watch(eventId, (changes) => onChanges(eventId, changes), {
          internal: true,
          // Changes made while Redis was away were not relayed.
          onResume: () => invalidateEvent(eventId),
        })
        .then(
          (stop) => {
            if (created.closed) return stop();
            created.stop = stop;
            created.live = true;
            // A change published before the subscription answered was not heard: read again.
            invalidateEvent(eventId);
          },
          (err: unknown) => {
            logger.warn({ err: (err as Error).message, eventId }, "section pages could not follow seat changes");
            if (watches.get(eventId) === created) watches.delete(eventId);
          },
        );
    }
    watch.slots++;
  }

  function unwatchEvent(eventId: string): void {
    const watch = watches.get(eventId);
    if (!watch || --watch.slots > 0) return;
    watches.delete(eventId);
    watch.closed = true;
    watch.stop?.();
  }

  function slotFor(eventId: string, sectionId: string, key: string): Slot {
    const found = slots.get(key);
    if (found) {
      // Least recently read first: a read moves its slot to the end (unless it is there already).
      if (newest !== found) {
        slots.delete(key);
        slots.set(key, found);
        newest = found;
      }
      return found;
    }
    while (slots.size >= maxPages) {
      const oldest = slots.values().next().value as Slot;
      slots.delete(oldest.key);
      unwatchEvent(oldest.eventId);
    }
    const slot: Slot = {
      key,
      eventId,
      sectionId,
      epoch: 0,
      page: undefined,
      pageEpoch: -1,
      pageGeneration: -1,
      checkedAt: 0,
      loading: undefined,
    };
    slots.set(key, slot);
    newest = slot;
    watchEvent(eventId);
    return slot;
  }

  function trusted(slot: Slot, now: number): boolean {
    if (slot.pageEpoch !== slot.epoch || slot.pageGeneration !== generation) return false;
    if (now - slot.checkedAt >= revalidateMs) return false;
    return watches.get(slot.eventId)?.live === true && relay.connected();
  }

  /** Keeps `page` as the slot's, trusted if nothing invalidated the section since its read began. */
  function settle(slot: Slot, page: Page, epoch: number, gen: number, startedAt: number): void {
    // An older read finishing after a newer one must not replace the newer page.
    if (epoch < slot.pageEpoch || (epoch === slot.pageEpoch && startedAt < slot.checkedAt)) return;
    if (gen < slot.pageGeneration) return;
    slot.page = page;
    slot.pageEpoch = epoch;
    slot.pageGeneration = gen;
    slot.checkedAt = startedAt;
  }

  function fromCache(slot: Slot): Promise<Page | null> {
    const epoch = slot.epoch;
    const gen = generation;
    const loading = slot.loading;
    if (loading && loading.epoch === epoch && loading.generation === gen) return loading.promise;
    const promise = (async () => {
      const startedAt = Date.now();
      const previous = slot.page;
      if (previous && slot.pageEpoch === epoch && slot.pageGeneration === gen) {
        // No change was heard of, only its time ran out: one small read says whether it changed.
        const version = await seatMap.version(slot.eventId, slot.sectionId);
        if (version === previous.version) {
          settle(slot, previous, epoch, gen, startedAt);
          return previous;
        }
      }
      const section = await seatMap.getSection(slot.eventId, slot.sectionId);
      if (!section) return null;
      // The same version read again (a change that did not touch it): its bodies are still good.
      const page = previous?.version === section.version ? previous : new Page(section, "cache", compress);
      settle(slot, page, epoch, gen, startedAt);
      return page;
    })();
    slot.loading = { epoch, generation: gen, promise };
    const clear = () => {
      if (slot.loading?.promise === promise) slot.loading = undefined;
    };
    promise.then(clear, clear);
    return promise;
  }

  async function fromStore(eventId: string, sectionId: string): Promise<Page | null> {
    const section = await seatMap.sectionFromStore(eventId, sectionId);
    if (!section) return null;
    let page = storePages.get(section);
    if (!page) {
      page = new Page(section, "store", compress);
      storePages.set(section, page);
    }
    return page;
  }

  async function load(slot: Slot): Promise<Page | null> {
    try {
      return await fromCache(slot);
    } catch (err) {
      // Redis failed the read: the authoritative store answers (slower, still correct).
      logger.debug({ err: (err as Error).message }, "seat-map cache unavailable; reading DynamoDB");
      return fromStore(slot.eventId, slot.sectionId);
    }
  }

  return {
    get(eventId, sectionId) {
      if (!seatMap.ready()) {
        // Redis is down: what was read before may be missing changes made meanwhile.
        generation++;
        logger.debug({ eventId, sectionId }, "seat-map cache unavailable; reading DynamoDB");
        return fromStore(eventId, sectionId);
      }
      const key = `${eventId}/${sectionId}`;
      const slot = slotFor(eventId, sectionId, key);
      if (slot.page && trusted(slot, Date.now())) return slot.page;
      return load(slot);
    },
    peek(eventId, sectionId) {
      if (!seatMap.ready()) return null;
      const slot = slots.get(`${eventId}/${sectionId}`);
      return slot?.page && trusted(slot, Date.now()) ? slot.page : null;
    },
    stats: () => ({ pages: slots.size, events: watches.size }),
    close() {
      stopWrites();
      for (const watch of watches.values()) {
        watch.closed = true;
        watch.stop?.();
      }
      watches.clear();
      slots.clear();
      newest = undefined;
    },
  };
}
