/**
 * The per-connection backlog of the seat-map stream (src/http/sse-backlog.ts), with no I/O: a
 * sink whose writes complete only when the test says so stands for a socket that does not drain.
 * The served behaviour (real sockets, real Redis) is in stream-limits.test.ts.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createSseBacklog } from "../../src/http/sse-backlog.js";

/** A sink whose writes stay pending until `drain()`. */
function stalledSink() {
  const written: string[] = [];
  const pending: (() => void)[] = [];
  let closed = 0;
  return {
    written,
    closed: () => closed,
    sink: {
      write(chunk: string) {
        written.push(chunk);
        return new Promise<void>((resolve) => pending.push(resolve));
      },
      close() {
        closed++;
      },
    },
    /** Completes every pending write and lets the backlog's loop run. */
    async drain() {
      for (const resolve of pending.splice(0)) resolve();
      for (let i = 0; i < 5; i++) await Promise.resolve();
    },
  };
}

const RESYNC = "event: ready\ndata: resumed\n\n";

function backlog(sink: ReturnType<typeof stalledSink>["sink"], maxBacklogBytes: number) {
  const events = { backlog: 0, overflows: [] as string[] };
  const frames = createSseBacklog(sink, {
    maxBacklogBytes,
    writeTimeoutMs: 1_000,
    resyncFrame: RESYNC,
    onBacklog: (delta) => {
      events.backlog += delta;
    },
    onOverflow: (action) => events.overflows.push(action),
  });
  return { frames, events };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("the seat-map stream's backlog", () => {
  it("writes the first ready before what was queued while subscribing, then one chunk per turn", async () => {
    const s = stalledSink();
    const { frames, events } = backlog(s.sink, 1_000);
    frames.send("a\n\n");
    frames.send("b\n\n");
    expect(s.written).toEqual([]);
    frames.start("ready\n\n");
    expect(s.written).toEqual(["ready\n\na\n\nb\n\n"]);
    frames.send("c\n\n");
    frames.send("d\n\n");
    expect(events.backlog).toBe(6);
    await s.drain();
    expect(s.written).toEqual(["ready\n\na\n\nb\n\n", "c\n\nd\n\n"]);
    expect(events.backlog).toBe(0);
    frames.stop();
  });

  it("past the bound behind a pending write: drops everything, then one resync once the write completes, then flows", async () => {
    const s = stalledSink();
    const { frames, events } = backlog(s.sink, 10);
    frames.start("r\n\n");
    for (let i = 0; i < 100; i++) frames.send(`${i % 10}${i % 10}\n\n`);
    expect(events.overflows).toEqual(["resync"]);
    expect(events.backlog).toBe(0);
    await s.drain();
    expect(s.written).toEqual(["r\n\n", RESYNC]);
    frames.send("x\n\n");
    await s.drain();
    expect(s.written).toEqual(["r\n\n", RESYNC, "x\n\n"]);
    frames.stop();
  });

  it("queues one message larger than the bound whole when the queue is under it", async () => {
    const s = stalledSink();
    const { frames, events } = backlog(s.sink, 10);
    frames.start("r\n\n");
    const sweep = "s\n\n".repeat(50);
    frames.send(sweep);
    expect(events.overflows).toEqual([]);
    await s.drain();
    expect(s.written).toEqual(["r\n\n", sweep]);
    frames.stop();
  });

  it("an overflow before the start needs no resync: the first ready is one", async () => {
    const s = stalledSink();
    const { frames } = backlog(s.sink, 10);
    for (let i = 0; i < 10; i++) frames.send("abcdef\n\n");
    frames.start("r\n\n");
    frames.send("y\n\n");
    await s.drain();
    expect(s.written).toEqual(["r\n\n", "y\n\n"]);
    frames.stop();
  });

  it("a write not completed within the timeout closes the connection once; nothing more is written", async () => {
    vi.useFakeTimers();
    const s = stalledSink();
    const { frames, events } = backlog(s.sink, 1_000);
    frames.start("r\n\n");
    frames.send("a\n\n");
    await vi.advanceTimersByTimeAsync(999);
    expect(s.closed()).toBe(0);
    await vi.advanceTimersByTimeAsync(2);
    expect(s.closed()).toBe(1);
    expect(events.overflows).toEqual(["closed"]);
    expect(events.backlog).toBe(0);
    frames.send("b\n\n");
    await s.drain();
    expect(s.written).toEqual(["r\n\n"]);
  });
});
