/**
 * The seat map when Redis is killed mid-sale and started again EMPTY (a redis-server of this
 * file's own): while it is down the pages are served from DynamoDB without a stampede (one load
 * per section at a time per gateway); afterwards the cache refills from DynamoDB with versions
 * never served before (an old If-None-Match gets no false 304), and open Server-Sent Events
 * streams resume by themselves: a second `ready`, then live changes again.
 */
import {
  type AdmittedFan,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  listen,
  metricTotal,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { killRedis, restartRedis } from "../support/redis-loss.js";

interface Section {
  sectionId: string;
  version: string;
  seats: { id: string; status: string }[];
}
interface Summary {
  sections: { id: string; available: number; total: number }[];
}

let redis: SpawnedRedis;
let gw: Gateway;
let server: Awaited<ReturnType<typeof listen>>;
let fan: AdmittedFan;
const eventId = uniqueId("sm");
/** Every ETag served before the loss. */
const versionsBefore = new Set<string>();
const statuses: number[] = [];
const figures: Record<string, number> = {};

/** An open SSE connection, read as text as it arrives. */
class Stream {
  private text = "";
  private readonly controller = new AbortController();
  private reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private readonly decoder = new TextDecoder();

  async open(url: string) {
    const res = await fetch(url, { signal: this.controller.signal });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    this.reader = res.body!.getReader();
  }

  /** Reads until `needle` has appeared `times` times in total. */
  async until(needle: string, times = 1, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    while (this.text.split(needle).length - 1 < times) {
      if (Date.now() > deadline) throw new Error(`no ${needle} x${times} in:\n${this.text}`);
      const { value, done } = await this.reader!.read();
      if (done) throw new Error(`stream ended before ${needle}:\n${this.text}`);
      this.text += this.decoder.decode(value, { stream: true });
    }
  }

  close() {
    this.controller.abort();
  }
}

async function section(id: string, headers: Record<string, string> = {}) {
  const res = await gw.request(`/v1/events/${eventId}/sections/${id}/seats`, { headers });
  statuses.push(res.status);
  return res;
}

async function hold(seats: string[]) {
  const res = await gw.request(`/v1/events/${eventId}/holds`, {
    method: "POST",
    json: { seats },
    token: fan.accessToken,
  });
  statuses.push(res.status);
  return res;
}

const statusOf = (body: Section, seat: string) => body.seats.find((s) => s.id === seat)?.status;

beforeAll(async () => {
  redis = await spawnRedis();
  gw = await startGateway({ tableName: await createTable(), redisUrl: redis.url });
  server = await listen(gw);
  expect((await putEvent(gw, eventId, eventInput({ maxSeatsPerFan: 4 }))).status).toBe(201);
  [fan] = (await admitFans(gw, eventId, ["mapfan"])) as [AdmittedFan];
}, 120_000);

afterAll(async () => {
  console.log(`redis loss (seat map): ${JSON.stringify(figures)}`);
  await server?.close();
  await gw?.close();
  await redis?.close();
});

describe("the seat map across a Redis loss", () => {
  const stream = new Stream();
  afterAll(() => stream.close());

  it("before: served from the cache, every change a new version", async () => {
    const first = await section("A");
    versionsBefore.add(((await first.json()) as Section).version);
    expect((await hold(["A-1-1"])).status).toBe(201);
    const second = (await (await section("A")).json()) as Section;
    expect(statusOf(second, "A-1-1")).toBe("held");
    versionsBefore.add(second.version);
    expect(versionsBefore.size).toBe(2);
    await stream.open(`${server.url}/v1/events/${eventId}/seatmap/stream`);
    await stream.until("event: ready");
  });

  it("while Redis is down: pages come from DynamoDB, one load per section for a crowd", async () => {
    await killRedis(redis, [gw]);

    // Holds go on (DynamoDB decides); the page shows them, read from the store.
    expect((await hold(["A-1-2"])).status).toBe(201);

    const queriesBefore = await metricTotal(gw, "gateway_dynamodb_commands_total", { command: "Query" });
    const crowd = await Promise.all(Array.from({ length: 40 }, () => section("A")));
    const bodies = (await Promise.all(crowd.map((r) => r.json()))) as Section[];
    const queries = (await metricTotal(gw, "gateway_dynamodb_commands_total", { command: "Query" })) - queriesBefore;
    expect(crowd.map((r) => r.status).every((s) => s === 200)).toBe(true);
    for (const body of bodies) {
      expect(body.version).toMatch(/^db\./);
      expect(versionsBefore.has(body.version)).toBe(false);
      expect(statusOf(body, "A-1-1")).toBe("held");
      expect(statusOf(body, "A-1-2")).toBe("held");
    }
    // One load (one Query for a 50-seat section), shared by the 40 readers; allow a reload or two
    // if the machine is slow enough for the short memory to run out.
    expect(queries).toBeLessThanOrEqual(3);
    figures.queriesFor40SectionReadsWhileDown = queries;

    // An ETag from before the loss never matches what the store says now.
    const old = await section("A", { "if-none-match": [...versionsBefore].map((v) => `"${v}"`).join(", ") });
    expect(old.status).toBe(200);

    // The summary counts availability in DynamoDB (not zeros), one count per section for a crowd.
    const countsBefore = await metricTotal(gw, "gateway_dynamodb_commands_total", { command: "Query" });
    const summaries = await Promise.all(Array.from({ length: 20 }, () => gw.request(`/v1/events/${eventId}/seatmap`)));
    const counts = (await metricTotal(gw, "gateway_dynamodb_commands_total", { command: "Query" })) - countsBefore;
    for (const res of summaries) {
      statuses.push(res.status);
      expect(res.status).toBe(200);
      const a = ((await res.json()) as Summary).sections.find((s) => s.id === "A");
      expect(a).toMatchObject({ available: 48, total: 50 });
    }
    expect(counts).toBeLessThanOrEqual(6);
    figures.queriesFor20SummariesWhileDown = counts;
  });

  it("after Redis returns empty: the cache refills with new versions, and the open stream resumes", async () => {
    redis = await restartRedis(redis.port, [gw]);
    const back = Date.now();

    // The stream says "read again" (a second ready), then carries live changes again.
    await stream.until('"resumed":true');
    figures.streamResumedMs = Date.now() - back;
    expect((await hold(["A-1-3"])).status).toBe(201);
    await stream.until('data: {"id":"A-1-3","status":"held"}');

    const ifNoneMatch = [...versionsBefore].map((v) => `"${v}"`).join(", ");
    const refilled = await section("A", { "if-none-match": ifNoneMatch });
    expect(refilled.status).toBe(200);
    const body = (await refilled.json()) as Section;
    expect(body.version).not.toMatch(/^db\./);
    expect(versionsBefore.has(body.version)).toBe(false);
    for (const seat of ["A-1-1", "A-1-2", "A-1-3"]) expect(statusOf(body, seat)).toBe("held");

    // The cache serves 304 for its own current version again.
    const same = await section("A", { "if-none-match": `"${body.version}"` });
    expect(same.status).toBe(304);

    const summary = (await (await gw.request(`/v1/events/${eventId}/seatmap`)).json()) as Summary;
    expect(summary.sections.find((s) => s.id === "A")).toMatchObject({ available: 47, total: 50 });
  });

  it("nothing answered a 5xx other than 503", () => {
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
  });
});
