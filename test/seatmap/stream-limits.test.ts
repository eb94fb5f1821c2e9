/**
 * The seat-map stream under clients that stop reading, and under too many clients.
 *
 * A stream whose socket does not drain must cost the gateway a bounded amount of memory however
 * many seat changes are published: past SSE_MAX_BACKLOG_BYTES of queued frames the connection's
 * changes are dropped and, once it drains, it gets one `ready` with `resumed: true` (read the map
 * again); a write that does not complete within SSE_WRITE_TIMEOUT_MS ends the connection. Streams
 * are capped per client IP (429) and per process (503), with the JSON error body.
 *
 * The clients are real TCP sockets (node:net) against the gateway served on a port in this
 * process; the changes are published on the event's Redis channel in the format the cache's Lua
 * publishes (lua/seatmap-apply-8.lua: one JSON array of `{id, status}` per message).
 */
import { connect, type Socket } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { seatMapKeys } from "../../src/seatmap/cache.js";
import {
  createTable,
  type Gateway,
  listen,
  metricTotal,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { pollUntil } from "../support/worker-process.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const CHANGES = 100_000;

let tableName: string;
let publisher: Redis;
const figures: Record<string, number | string> = {};

beforeAll(async () => {
  tableName = await createTable();
  publisher = new Redis(inject("redisUrl"));
});

afterAll(() => {
  console.log(`seat-map stream limits: ${JSON.stringify(figures)}`);
  publisher?.disconnect();
});

/**
 * A seat-map stream over a raw socket: what arrived, as text (only its tail once `keepTail` is
 * set), and the number of `seat` events; `socket.pause()` stops reading it.
 */
class RawStream {
  readonly socket: Socket;
  text = "";
  ended = false;
  seatEvents = 0;
  /** Keep only this many characters of text (a client whose volume is not what is measured). */
  keepTail: number | undefined;
  private readonly waiters = new Set<() => void>();

  constructor(url: string, path: string, headers: Record<string, string> = {}) {
    const { hostname, port, host } = new URL(url);
    this.socket = connect({ host: hostname, port: Number(port) });
    this.socket.setEncoding("utf8");
    this.socket.on("data", (chunk: string) => {
      // A frame's marker may straddle two chunks: count over the previous text's end too.
      const seam = this.text.slice(-SEAT_MARK.length + 1);
      this.seatEvents += (seam + chunk).split(SEAT_MARK).length - 1;
      this.text += chunk;
      if (this.keepTail !== undefined && this.text.length > this.keepTail) this.text = this.text.slice(-this.keepTail);
      this.wake();
    });
    const end = () => {
      this.ended = true;
      this.wake();
    };
    this.socket.on("end", end);
    this.socket.on("close", end);
    this.socket.on("error", () => {});
    const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nAccept: text/event-stream\r\n${extra.join("")}\r\n`);
  }

  private wake() {
    for (const w of this.waiters) w();
  }

  get status(): number {
    return Number(/^HTTP\/1\.1 (\d{3})/.exec(this.text)?.[1] ?? 0);
  }

  count(needle: string): number {
    return this.text.split(needle).length - 1;
  }

  /** Resolves once `done()` holds; rejects after `timeoutMs` (or at EOF when `done` never held). */
  until(what: string, done: () => boolean, timeoutMs = 60_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => finish(new Error(`timed out waiting for ${what}; got:\n${this.tail()}`)),
        timeoutMs,
      );
      const check = () => {
        if (done()) finish();
        else if (this.ended) finish(new Error(`connection ended before ${what}; got:\n${this.tail()}`));
      };
      const finish = (err?: Error) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err);
        else resolve();
      };
      this.waiters.add(check);
      check();
    });
  }

  tail(): string {
    return this.text.length > 2_000 ? `…${this.text.slice(-2_000)}` : this.text;
  }

  close() {
    this.socket.destroy();
  }
}

const SEAT_MARK = "event: seat\n";
const seatFrame = (id: string, status: string) => `event: seat\ndata: {"id":"${id}","status":"${status}"}`;

/** Publishes `count` one-seat changes (a hold's message each), `perPipeline` per round trip. */
async function publishChanges(
  eventId: string,
  count: number,
  options: { perPipeline?: number; onBatch?: () => Promise<void> } = {},
): Promise<void> {
  const channel = seatMapKeys.channel(eventId);
  const perPipeline = options.perPipeline ?? 1_000;
  for (let sent = 0; sent < count; ) {
    const pipeline = publisher.pipeline();
    for (let i = 0; i < perPipeline && sent < count; i++, sent++) {
      const seat = `A-${1 + (sent % 50)}-${sent}`;
      pipeline.publish(channel, JSON.stringify([{ id: seat, status: sent % 2 === 0 ? "held" : "available" }]));
    }
    await pipeline.exec();
    await options.onBatch?.();
  }
}

/** Waits (up to 30 s) until the gateway holds no stream slot: every closed stream gave its slot back. */
async function slotsReleased(gw: Gateway) {
  await pollUntil(
    "every slot released",
    () => metricTotal(gw, "gateway_sse_streams"),
    (n) => n === 0,
    { timeoutMs: 30_000 },
  );
}

/** Counts the changes the gateway's relay hands its watchers: the relay calls every watcher at once. */
async function countRelayed(gw: Gateway, eventId: string) {
  const counted = { changes: 0, stop: () => {} };
  counted.stop = await gw.deps.relay.watch(eventId, (changes) => {
    counted.changes += changes.length;
  });
  return counted;
}

function memory() {
  gc();
  gc();
  const { heapUsed, rss, external, arrayBuffers } = process.memoryUsage();
  return { heapUsed, rss, external, arrayBuffers };
}

const MiB = 1024 * 1024;

describe("a client that stops reading", () => {
  let gw: Gateway;
  let server: Awaited<ReturnType<typeof listen>>;
  const eventId = uniqueId("sse");
  const BACKLOG = 64 * 1024;

  beforeAll(async () => {
    gw = await startGateway({
      tableName,
      // The write timeout outlasts the publishing (on a loaded machine, tens of seconds), so the
      // stalled connection lives through it and can be resynced afterwards.
      limits: { streamBacklogBytes: BACKLOG, streamWriteTimeoutMs: 300_000 },
    });
    server = await listen(gw);
    expect((await putEvent(gw, eventId)).status).toBe(201);
  });

  afterAll(async () => {
    await server?.close();
    await gw?.close();
  });

  it("2 x 100,000 seat changes published: the gateway's memory stays flat, a reading client stays live, the stalled one is resynced with one ready {resumed: true}", async () => {
    const path = `/v1/events/${eventId}/seatmap/stream`;
    const stalled = new RawStream(server.url, path);
    const reading = new RawStream(server.url, path);
    const relayed = await countRelayed(gw, eventId);
    try {
      await stalled.until("the first ready", () => stalled.text.includes("event: ready"));
      await reading.until("the first ready", () => reading.text.includes("event: ready"));
      expect(stalled.status).toBe(200);
      // The stalled client stops reading: its receive buffer fills, then the gateway's send buffer.
      stalled.socket.pause();

      // The reading client's text is not what is measured: only its tail is kept.
      reading.keepTail = 4_000;

      let maxBacklog = 0;
      const publishAndMeasure = async (total: number) => {
        await publishChanges(eventId, CHANGES, {
          onBatch: async () => {
            maxBacklog = Math.max(maxBacklog, await metricTotal(gw, "gateway_sse_backlog_bytes"));
          },
        });
        // Every change has reached every watcher of the relay, the stalled stream's included.
        await pollUntil(
          "every change relayed",
          async () => relayed.changes,
          (n) => n >= total,
          {
            timeoutMs: 240_000,
            intervalMs: 200,
          },
        );
        return memory();
      };
      const growth = (from: ReturnType<typeof memory>, to: ReturnType<typeof memory>) => ({
        heapUsedMiB: +((to.heapUsed - from.heapUsed) / MiB).toFixed(1),
        externalMiB: +((to.external - from.external) / MiB).toFixed(1),
        rssMiB: +((to.rss - from.rss) / MiB).toFixed(1),
      });
      // The first 100,000 fill the stalled socket's buffers (the kernel takes several MiB on
      // loopback: its send buffer grows to tcp_wmem's max) and bring the process to its steady
      // state (heap and RSS grown for the burst); the next 100,000 are what is measured.
      const start = memory();
      const warm = await publishAndMeasure(CHANGES);
      const end = await publishAndMeasure(2 * CHANGES);
      const first = growth(start, warm);
      const second = growth(warm, end);
      Object.assign(figures, {
        changesPerPhase: CHANGES,
        firstPhase: JSON.stringify(first),
        secondPhase: JSON.stringify(second),
        maxBacklogBytes: maxBacklog,
        readingClientSeatEvents: reading.seatEvents,
      });
      // Before the fix every change published to the stalled stream stayed chained in memory:
      // +17 MiB of heap per 100,000 (measured; see the commit). Bounded, the second 100,000
      // leave the heap where the first left it.
      expect(first.heapUsedMiB + first.externalMiB, JSON.stringify(first)).toBeLessThan(8);
      expect(second.heapUsedMiB + second.externalMiB, JSON.stringify(second)).toBeLessThan(4);
      // Two streams, each at most its backlog and one message queued (the gauge sums them).
      expect(maxBacklog).toBeLessThanOrEqual(2 * (BACKLOG + 1_000));

      // The stalled client reads again: what was buffered, then one ready telling it to re-read.
      stalled.socket.resume();
      await stalled.until("a resumed ready", () => stalled.text.includes('"resumed":true'));
      expect(stalled.count("event: ready")).toBe(2);
      // What the kernel's socket buffers took before the stall (several MiB on loopback: the send
      // buffer grows to tcp_wmem's max) arrives; what came after it was dropped for the resync.
      figures.stalledClientSeatEvents = stalled.seatEvents;
      expect(stalled.seatEvents).toBeLessThan(CHANGES);
      expect(reading.seatEvents).toBeGreaterThan(CHANGES);
      expect(await metricTotal(gw, "gateway_sse_overflows_total", { action: "resync" })).toBeGreaterThanOrEqual(1);

      // Both are live afterwards: a new change reaches each of them.
      await publisher.publish(seatMapKeys.channel(eventId), JSON.stringify([{ id: "B-1-1", status: "sold" }]));
      const last = seatFrame("B-1-1", "sold");
      await stalled.until("the change after the resync", () => stalled.text.includes(last));
      await reading.until("the change after the publishing", () => reading.text.includes(last));
      expect(reading.seatEvents).toBeGreaterThan(0);
    } finally {
      relayed.stop();
      stalled.close();
      reading.close();
    }
  }, 600_000);
});

describe("a client that never reads again", () => {
  let gw: Gateway;
  let server: Awaited<ReturnType<typeof listen>>;
  const eventId = uniqueId("sse");

  beforeAll(async () => {
    gw = await startGateway({ tableName, limits: { streamBacklogBytes: 16 * 1024, streamWriteTimeoutMs: 1_000 } });
    server = await listen(gw);
    expect((await putEvent(gw, eventId)).status).toBe(201);
  });

  afterAll(async () => {
    await server?.close();
    await gw?.close();
  });

  it("is disconnected once a write has not completed within the write timeout; its watcher is gone", {
    timeout: 120_000,
  }, async () => {
    const stalled = new RawStream(server.url, `/v1/events/${eventId}/seatmap/stream`);
    try {
      await stalled.until("the first ready", () => stalled.text.includes("event: ready"));
      stalled.socket.pause();
      expect(gw.deps.relay.watchers()).toBe(1);
      // Until the socket's buffers are full (the kernel's send buffer grows to several MiB on
      // loopback) and a write stays pending past the timeout. 100 changes per round trip: few
      // enough that the stream keeps up while the socket takes them, so they fill its buffers.
      let sent = 0;
      while (gw.deps.relay.watchers() > 0) {
        if (sent >= 500_000) throw new Error(`${sent} changes published and the stalled stream is still open`);
        await publishChanges(eventId, 10_000, { perPipeline: 100 });
        sent += 10_000;
      }
      figures.changesUntilDisconnected = sent;
      expect(await metricTotal(gw, "gateway_sse_overflows_total", { action: "closed" })).toBe(1);
      expect(await metricTotal(gw, "gateway_sse_streams")).toBe(0);
      // The client sees its connection end (after what was already in its buffers).
      stalled.socket.resume();
      await pollUntil("the client's socket closed", async () => stalled.ended, Boolean, { timeoutMs: 30_000 });
    } finally {
      stalled.close();
    }
  });
});

describe("stream caps", () => {
  let gw: Gateway;
  let server: Awaited<ReturnType<typeof listen>>;
  const eventId = uniqueId("sse");
  const PER_IP = 3;
  const PER_PROCESS = 8;

  beforeAll(async () => {
    gw = await startGateway({
      tableName,
      // X-Forwarded-For stands for the client address, as behind the one trusted proxy.
      limits: { trustProxy: true, maxStreamsPerIp: PER_IP, maxStreams: PER_PROCESS },
    });
    server = await listen(gw);
    expect((await putEvent(gw, eventId)).status).toBe(201);
  });

  afterAll(async () => {
    await server?.close();
    await gw?.close();
  });

  const open = (ip: string) =>
    new RawStream(server.url, `/v1/events/${eventId}/seatmap/stream`, { "X-Forwarded-For": ip });

  /** Waits until every stream has either its first ready or a complete refusal. */
  const answered = (streams: RawStream[]) =>
    Promise.all(
      streams.map((s) =>
        s.until("an answer", () => s.text.includes("event: ready") || (s.status >= 400 && s.text.endsWith("}"))),
      ),
    );

  const errorOf = (s: RawStream) =>
    JSON.parse(s.text.slice(s.text.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };

  it("per IP: 10 streams opened at once from one address, 3 served, 7 refused with 429 rate_limited and Retry-After", async () => {
    const streams = Array.from({ length: 10 }, () => open("198.51.100.1"));
    try {
      await answered(streams);
      const served = streams.filter((s) => s.status === 200);
      const refused = streams.filter((s) => s.status === 429);
      expect(served).toHaveLength(PER_IP);
      expect(refused).toHaveLength(10 - PER_IP);
      for (const s of refused) {
        expect(s.text).toMatch(/\r\nretry-after: \d+\r\n/i);
        expect(s.text).toMatch(/\r\ncontent-type: application\/json/i);
        expect(errorOf(s).error.code).toBe("rate_limited");
      }
      // Another address is not affected.
      const other = open("198.51.100.2");
      await answered([other]);
      expect(other.status).toBe(200);
      streams.push(other);
      expect(await metricTotal(gw, "gateway_sse_streams")).toBe(PER_IP + 1);

      // A slot comes back when its stream ends.
      served[0]!.close();
      await pollUntil(
        "the closed stream's slot released",
        () => metricTotal(gw, "gateway_sse_streams"),
        (n) => n === PER_IP,
        {
          timeoutMs: 30_000,
        },
      );
      const again = open("198.51.100.1");
      streams.push(again);
      await answered([again]);
      expect(again.status).toBe(200);
    } finally {
      for (const s of streams) s.close();
    }
    await slotsReleased(gw);
  });

  it("HEAD answers the stream's headers and takes no slot: ten HEADs, then the address's streams are all served", async () => {
    const heads = await Promise.all(
      Array.from({ length: 10 }, () =>
        fetch(`${server.url}/v1/events/${eventId}/seatmap/stream`, {
          method: "HEAD",
          headers: { "X-Forwarded-For": "198.51.100.9" },
        }),
      ),
    );
    for (const res of heads) {
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    }
    expect(await metricTotal(gw, "gateway_sse_streams")).toBe(0);
    const streams = Array.from({ length: PER_IP }, () => open("198.51.100.9"));
    try {
      await answered(streams);
      expect(streams.map((s) => s.status)).toEqual(Array(PER_IP).fill(200));
    } finally {
      for (const s of streams) s.close();
    }
    await slotsReleased(gw);
  });

  it("per process: 20 streams opened at once from 20 addresses, 8 served, 12 refused with 503 unavailable and Retry-After", async () => {
    const streams = Array.from({ length: 20 }, (_, i) => open(`203.0.113.${i + 1}`));
    try {
      await answered(streams);
      const served = streams.filter((s) => s.status === 200);
      const refused = streams.filter((s) => s.status === 503);
      expect(served).toHaveLength(PER_PROCESS);
      expect(refused).toHaveLength(20 - PER_PROCESS);
      for (const s of refused) {
        expect(s.text).toMatch(/\r\nretry-after: \d+\r\n/i);
        expect(errorOf(s).error.code).toBe("unavailable");
      }
      expect(gw.deps.relay.watchers()).toBe(PER_PROCESS);
      expect(await metricTotal(gw, "gateway_sse_refused_total", { limit: "process" })).toBe(20 - PER_PROCESS);
    } finally {
      for (const s of streams) s.close();
    }
    await slotsReleased(gw);
  });
});
