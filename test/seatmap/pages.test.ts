/**
 * The section seat map served from the gateway's memory (src/seatmap/pages.ts), against a real
 * Redis and DynamoDB: its size on the wire with gzip and br, content negotiation, ETag/304 per
 * encoding and format, staleness after a change published by another process, a change landing
 * while a page is being compressed, many reads and changes at once, the memory bound, and the
 * DynamoDB fallback when Redis dies (a redis-server of this file's own).
 */
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { createMetrics } from "../../src/metrics.js";
import { createSeatMapCache, type SeatStatus } from "../../src/seatmap/cache.js";
import { type CompactSection, expandCompact } from "../../src/seatmap/formats.js";
import { compressBody } from "../../src/seatmap/pages.js";
import { createTable, eventInput, type Gateway, listen, putEvent, startGateway, uniqueId } from "../gateway/harness.js";
import { exchange } from "../support/exchange.js";
import { killRedis, restartRedis } from "../support/redis-loss.js";
import { pollUntil } from "../support/worker-process.js";

interface Section {
  sectionId: string;
  version: string;
  seats: { id: string; status: SeatStatus }[];
}

/** A real HTTP exchange, bytes as they crossed the wire (nothing decompressed). */
const raw = exchange;

function decode(body: Buffer, encoding: string | undefined): string {
  if (encoding === "br") return brotliDecompressSync(body).toString("utf8");
  if (encoding === "gzip") return gunzipSync(body).toString("utf8");
  return body.toString("utf8");
}

/** A fixed mix of held and sold seats (about a third each, no pattern a compressor could exploit). */
function mixedChanges(sectionId: string, rows: number, perRow: number) {
  let x = 0x2545f491;
  const changes: { id: string; status: SeatStatus; holdExpiresAt?: number }[] = [];
  for (let r = 1; r <= rows; r++) {
    for (let n = 1; n <= perRow; n++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      const pick = (x >>> 0) % 3;
      if (pick === 1)
        changes.push({ id: `${sectionId}-${r}-${n}`, status: "held", holdExpiresAt: Date.now() + 600_000 });
      if (pick === 2) changes.push({ id: `${sectionId}-${r}-${n}`, status: "sold" });
    }
  }
  return changes;
}

const GOAL = { 1000: 3_000, 2000: 4_096 } as const;
const figures: Record<string, number> = {};

describe("section pages: size on the wire, negotiation, ETag per encoding", () => {
  let gw: Gateway;
  let server: Awaited<ReturnType<typeof listen>>;
  const eventId = uniqueId("pg");
  const sections = [
    { id: "K1", tier: "Floor", price: 10_000, rows: 20, seatsPerRow: 50 },
    { id: "K2", tier: "Upper", price: 5_000, rows: 40, seatsPerRow: 50 },
  ];

  beforeAll(async () => {
    gw = await startGateway({ tableName: await createTable() });
    server = await listen(gw);
    expect((await putEvent(gw, eventId, eventInput({ sections, generalAdmission: [] }))).status).toBe(201);
    // The cache is what the page serves: a third of the seats held, a third sold.
    for (const s of sections) await gw.deps.seatMap.apply(eventId, mixedChanges(s.id, s.rows, s.seatsPerRow));
  }, 120_000);

  afterAll(async () => {
    console.log(`section pages (bytes on the wire): ${JSON.stringify(figures)}`);
    await server?.close();
    await gw?.close();
  });

  const url = (sectionId: string, format?: string) =>
    `${server.url}/v1/events/${eventId}/sections/${sectionId}/seats${format ? `?format=${format}` : ""}`;

  for (const [sectionId, seats] of [
    ["K1", 1_000],
    ["K2", 2_000],
  ] as const) {
    it(`${seats} seats, compact: <= ${GOAL[seats]} bytes with gzip and with br, the same seats as the JSON form`, async () => {
      const identity = await raw(url(sectionId));
      expect(identity.status).toBe(200);
      const full = JSON.parse(identity.body.toString("utf8")) as Section;
      expect(full.seats).toHaveLength(seats);
      expect(new Set(full.seats.map((s) => s.status))).toEqual(new Set(["available", "held", "sold"]));
      figures[`json identity ${seats}`] = identity.body.length;

      for (const encoding of ["gzip", "br"] as const) {
        const res = await raw(url(sectionId, "compact"), { "accept-encoding": encoding });
        expect(res.status).toBe(200);
        expect(res.headers["content-encoding"]).toBe(encoding);
        expect(Number(res.headers["content-length"])).toBe(res.body.length);
        expect(res.headers.vary).toBe("Accept-Encoding");
        expect(res.body.length).toBeLessThanOrEqual(GOAL[seats]);
        figures[`compact ${encoding} ${seats}`] = res.body.length;
        const compact = JSON.parse(decode(res.body, encoding)) as CompactSection;
        expect(compact.version).toBe(full.version);
        expect(expandCompact(compact)).toEqual(full.seats);

        const json = await raw(url(sectionId), { "accept-encoding": encoding });
        expect(json.headers["content-encoding"]).toBe(encoding);
        expect(Number(json.headers["content-length"])).toBe(json.body.length);
        expect(JSON.parse(decode(json.body, encoding))).toEqual(full);
        figures[`json ${encoding} ${seats}`] = json.body.length;
      }
      // The JSON form with br meets the 1,000-seat goal too (2,000 random seats spelled out do not:
      // that is what the compact form is for).
      if (seats === 1_000) expect(figures[`json br ${seats}`]).toBeLessThanOrEqual(GOAL[seats]);
    });
  }

  it("negotiates br, then gzip, then identity, honouring q-values", async () => {
    const cases: [string | undefined, string | undefined][] = [
      ["gzip, deflate, br", "br"],
      ["gzip", "gzip"],
      ["br;q=0, gzip", "gzip"],
      ["gzip;q=0, br;q=0", undefined],
      ["identity;q=0, gzip", "gzip"],
      ["deflate", undefined],
      [undefined, undefined],
    ];
    for (const [accept, expected] of cases) {
      const res = await raw(url("K1"), accept ? { "accept-encoding": accept } : {});
      expect(res.status, String(accept)).toBe(200);
      expect(res.headers["content-encoding"], String(accept)).toBe(expected);
      expect(res.headers.vary).toBe("Accept-Encoding");
      expect(Number(res.headers["content-length"])).toBe(res.body.length);
      expect((JSON.parse(decode(res.body, expected)) as Section).seats).toHaveLength(1_000);
    }
  });

  it("ETag and 304 per encoding and format: each answers its own tag, a change answers 200 with a new one", async () => {
    const tags = new Map<string, string>();
    for (const format of ["json", "compact"]) {
      for (const accept of ["br", "gzip", "identity"]) {
        const first = await raw(url("K1", format), { "accept-encoding": accept });
        expect(first.status).toBe(200);
        const etag = String(first.headers.etag);
        const version = (JSON.parse(decode(first.body, first.headers["content-encoding"] as string)) as Section)
          .version;
        const tag = format === "compact" ? `"${version}.c"` : `"${version}"`;
        // Weak on a compressed body (other bytes, the same content), strong on identity.
        expect(etag).toBe(accept === "identity" ? tag : `W/${tag}`);
        tags.set(`${format}/${accept}`, etag);

        const again = await raw(url("K1", format), { "accept-encoding": accept, "if-none-match": etag });
        expect(again.status).toBe(304);
        expect(again.body.length).toBe(0);
        expect(again.headers.etag).toBe(etag);
        expect(again.headers.vary).toBe("Accept-Encoding");
        expect(again.headers["x-request-id"]).toBeTruthy();
        // The same version's tag from another encoding is the same content: 304 too.
        const other = await raw(url("K1", format), { "accept-encoding": accept, "if-none-match": tag });
        expect(other.status).toBe(304);
      }
    }
    // A JSON tag never validates the compact form, nor the other way round.
    const crossed = await raw(url("K1", "compact"), { "if-none-match": String(tags.get("json/identity")) });
    expect(crossed.status).toBe(200);
    const crossed2 = await raw(url("K1"), { "if-none-match": String(tags.get("compact/identity")) });
    expect(crossed2.status).toBe(200);

    // A change: every old tag now gets the new content.
    await gw.deps.seatMap.apply(eventId, [{ id: "K1-1-1", status: "sold" }]);
    for (const [key, etag] of tags) {
      const [format, accept] = key.split("/") as [string, string];
      const res = await raw(url("K1", format), { "accept-encoding": accept, "if-none-match": etag });
      expect(res.status, key).toBe(200);
      expect(res.headers.etag).not.toBe(etag);
      const body = JSON.parse(decode(res.body, res.headers["content-encoding"] as string)) as Section | CompactSection;
      const seats = "seats" in body ? body.seats : expandCompact(body);
      expect(seats[0]).toEqual({ id: "K1-1-1", status: "sold" });
    }
  });

  it("an unknown format is 400 invalid_request in the one error body", async () => {
    const res = await gw.request(`/v1/events/${eventId}/sections/K1/seats?format=xml`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_request");
  });
});

describe("section pages: staleness, changes during compression, many at once, memory", () => {
  let gw: Gateway;
  let other: ReturnType<typeof createSeatMapCache>;
  let otherRedis: Redis;
  let releaseCompression: () => void = () => {};
  let holdCompression = false;
  let compressions = 0;
  const eventId = uniqueId("pg");

  beforeAll(async () => {
    gw = await startGateway({
      tableName: await createTable(),
      sectionPages: {
        // Long: within these tests only a change heard of (pub/sub, or this process's writes) can
        // make a page current again.
        revalidateMs: 600_000,
        maxPages: 3,
        compress: async (body, encoding) => {
          compressions++;
          if (holdCompression) await new Promise<void>((resolve) => (releaseCompression = resolve));
          return compressBody(body, encoding);
        },
      },
    });
    expect((await putEvent(gw, eventId)).status).toBe(201);
    // Another gateway process: its own connection, its own cache module, the same Redis.
    otherRedis = new Redis(inject("redisUrl"));
    other = createSeatMapCache({
      redis: otherRedis,
      source: { loadSection: async () => null },
      metrics: createMetrics(),
      logger: pino({ level: "silent" }),
    });
  }, 120_000);

  afterAll(async () => {
    otherRedis?.disconnect();
    await gw?.close();
  });

  const read = async (sectionId = "A", headers: Record<string, string> = {}) => {
    const res = await gw.request(`/v1/events/${eventId}/sections/${sectionId}/seats`, { headers });
    return { res, body: res.status === 200 ? ((await res.json()) as Section) : undefined };
  };
  const statusOf = (body: Section | undefined, seat: string) => body?.seats.find((s) => s.id === seat)?.status;

  it("a change another process publishes is in the next read within a short poll", async () => {
    const first = await read();
    expect(statusOf(first.body, "A-2-2")).toBe("available");
    // The page is trusted (served with no Redis read) once the event's subscription answered.
    await pollUntil(
      "the page trusted",
      async () => gw.deps.sectionPages.get(eventId, "A") instanceof Promise,
      (p) => !p,
      {
        timeoutMs: 30_000,
        intervalMs: 20,
      },
    );
    const before = (await read()).body?.version;

    await other.apply(eventId, [{ id: "A-2-2", status: "held", holdExpiresAt: Date.now() + 60_000 }]);
    const started = Date.now();
    const seen = await pollUntil(
      "the held seat",
      () => read(),
      (r) => statusOf(r.body, "A-2-2") === "held",
      {
        timeoutMs: 10_000,
        intervalMs: 5,
      },
    );
    figures.msUntilAnotherProcessChangeSeen = Date.now() - started;
    expect(seen.body?.version).not.toBe(before);
    // Served from memory again afterwards.
    await pollUntil(
      "trusted again",
      async () => gw.deps.sectionPages.get(eventId, "A") instanceof Promise,
      (p) => !p,
      {
        timeoutMs: 30_000,
        intervalMs: 20,
      },
    );
  });

  it("a fan reads back their own change at once (this process's writes drop the page before answering)", async () => {
    for (const [i, status] of (["held", "available", "held", "sold"] as const).entries()) {
      await gw.deps.seatMap.apply(eventId, [{ id: "A-3-1", status, holdExpiresAt: Date.now() + 60_000 }]);
      expect(statusOf((await read()).body, "A-3-1"), `change ${i}`).toBe(status);
    }
  });

  it("a change while a page is being compressed: the old page keeps its own ETag and content, the new ETag gets the new content", async () => {
    const plain = await read("B");
    const version1 = plain.body!.version;
    expect(statusOf(plain.body, "B-1-1")).toBe("available");

    holdCompression = true;
    const compressing = compressions;
    const slow = gw.request(`/v1/events/${eventId}/sections/B/seats`, { headers: { "accept-encoding": "br" } });
    await pollUntil(
      "the compression started",
      async () => compressions,
      (n) => n > compressing,
      {
        timeoutMs: 10_000,
        intervalMs: 5,
      },
    );
    const firstRelease = releaseCompression;
    holdCompression = false;

    // The change lands while version 1 is being compressed.
    await gw.deps.seatMap.apply(eventId, [{ id: "B-1-1", status: "held", holdExpiresAt: Date.now() + 60_000 }]);
    const fresh = await gw.request(`/v1/events/${eventId}/sections/B/seats`, { headers: { "accept-encoding": "br" } });
    const freshBody = JSON.parse(
      brotliDecompressSync(Buffer.from(await fresh.arrayBuffer())).toString("utf8"),
    ) as Section;
    expect(fresh.headers.get("etag")).toBe(`W/"${freshBody.version}"`);
    expect(freshBody.version).not.toBe(version1);
    expect(statusOf(freshBody, "B-1-1")).toBe("held");

    firstRelease();
    const old = await slow;
    const oldBody = JSON.parse(brotliDecompressSync(Buffer.from(await old.arrayBuffer())).toString("utf8")) as Section;
    // The page compressed meanwhile is served under its own version only.
    expect(old.headers.get("etag")).toBe(`W/"${oldBody.version}"`);
    expect(oldBody.version).toBe(version1);
    expect(statusOf(oldBody, "B-1-1")).toBe("available");

    // And the new ETag is never answered with the old content.
    const again = await gw.request(`/v1/events/${eventId}/sections/B/seats`, {
      headers: { "accept-encoding": "br", "if-none-match": `W/"${version1}"` },
    });
    expect(again.status).toBe(200);
    const current = JSON.parse(
      brotliDecompressSync(Buffer.from(await again.arrayBuffer())).toString("utf8"),
    ) as Section;
    expect(current.version).toBe(freshBody.version);
    expect(statusOf(current, "B-1-1")).toBe("held");
  });

  it("200 reads in flight while 20 changes land, in both encodings: every body matches its ETag, the last version shows every change", async () => {
    // Rows 4 and 5: seats no earlier test touched.
    const seats = Array.from({ length: 20 }, (_, i) => `A-${5 - Math.floor(i / 10)}-${(i % 10) + 1}`);
    const reads = Array.from({ length: 200 }, async (_, i) => {
      const res = await gw.request(`/v1/events/${eventId}/sections/A/seats${i % 2 ? "?format=compact" : ""}`, {
        headers: { "accept-encoding": i % 3 === 0 ? "gzip" : "br" },
      });
      const bytes = Buffer.from(await res.arrayBuffer());
      const encoding = res.headers.get("content-encoding") ?? undefined;
      const body = JSON.parse(decode(bytes, encoding)) as Section | CompactSection;
      return { etag: res.headers.get("etag"), body };
    });
    const writes = seats.map((id) =>
      gw.deps.seatMap.apply(eventId, [{ id, status: "held", holdExpiresAt: Date.now() + 60_000 }]),
    );
    const answers = await Promise.all(reads);
    await Promise.all(writes);
    for (const { etag, body } of answers) {
      const tag = "layout" in body ? `"${body.version}.c"` : `"${body.version}"`;
      expect(etag).toBe(`W/${tag}`);
    }
    const last = (await read()).body!;
    for (const id of seats) expect(statusOf(last, id)).toBe("held");
    // Any answer of that same version shows every change too.
    for (const { body } of answers.filter((a) => a.body.version === last.version)) {
      const got = "layout" in body ? expandCompact(body) : body.seats;
      for (const id of seats) expect(got.find((s) => s.id === id)?.status).toBe("held");
    }
  });

  it("keeps at most maxPages pages, and watches only events it keeps pages of (not counted as streams)", async () => {
    const second = uniqueId("pg");
    expect((await putEvent(gw, second)).status).toBe(201);
    for (const s of ["A", "B"]) await read(s);
    for (const s of ["A", "B"]) {
      const res = await gw.request(`/v1/events/${second}/sections/${s}/seats`);
      expect(res.status).toBe(200);
    }
    expect(gw.deps.sectionPages.stats().pages).toBeLessThanOrEqual(3);
    // The first event's last page was dropped: its subscription with it.
    expect(gw.deps.sectionPages.stats().events).toBeLessThanOrEqual(2);
    expect(gw.deps.relay.watchers()).toBe(0);
  });
});

describe("section pages while Redis is down", () => {
  let redis: SpawnedRedis;
  let gw: Gateway;
  const eventId = uniqueId("pg");

  beforeAll(async () => {
    redis = await spawnRedis();
    gw = await startGateway({ tableName: await createTable(), redisUrl: redis.url });
    expect((await putEvent(gw, eventId)).status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    await redis?.close();
  });

  it("are read from DynamoDB (never the page from before), compressed, 304 for their own tag; new versions after", async () => {
    const before = await gw.request(`/v1/events/${eventId}/sections/A/seats`, { headers: { "accept-encoding": "br" } });
    const beforeTag = before.headers.get("etag")!;
    expect(beforeTag).toMatch(/^W\/"[0-9a-f]{16}\.\d+"$/);

    await killRedis(redis, [gw]);
    const down = await gw.request(`/v1/events/${eventId}/sections/A/seats`, {
      headers: { "accept-encoding": "br", "if-none-match": beforeTag },
    });
    expect(down.status).toBe(200);
    expect(down.headers.get("content-encoding")).toBe("br");
    const downBody = JSON.parse(
      brotliDecompressSync(Buffer.from(await down.arrayBuffer())).toString("utf8"),
    ) as Section;
    expect(downBody.version).toMatch(/^db\./);
    expect(downBody.seats).toHaveLength(50);
    expect(down.headers.get("etag")).toBe(`W/"${downBody.version}"`);
    // The store's answer is kept a moment: its own tag gets 304 (or, past the 2 s, a new db. version).
    const again = await gw.request(`/v1/events/${eventId}/sections/A/seats`, {
      headers: { "accept-encoding": "br", "if-none-match": down.headers.get("etag")! },
    });
    expect([200, 304]).toContain(again.status);
    if (again.status === 200) expect(again.headers.get("etag")).toMatch(/^W\/"db\./);

    redis = await restartRedis(redis.port, [gw]);
    const back = await pollUntil(
      "the cache serving again",
      async () => {
        const res = await gw.request(`/v1/events/${eventId}/sections/A/seats`, {
          headers: { "if-none-match": `${beforeTag}, ${down.headers.get("etag")}` },
        });
        return { status: res.status, body: res.status === 200 ? ((await res.json()) as Section) : undefined };
      },
      (r) => r.status === 200 && !r.body?.version.startsWith("db."),
      { timeoutMs: 30_000 },
    );
    expect(`"${back.body?.version}"`).not.toBe(beforeTag.slice(2));
  });
});
