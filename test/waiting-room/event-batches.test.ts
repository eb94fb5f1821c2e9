/**
 * The per-event batch queue both join paths share (src/waiting-room/event-batches.ts): one batch
 * of an event in flight at a time, what arrived meanwhile as the next, in arrival order, a failed
 * batch's requests rejected and the queue going on. A pure queue: its `send` here is the test's.
 * The join paths' own tests (join-batch, join-linger for the linger, join, fan-records) run it
 * against Redis.
 */
import { describe, expect, it } from "vitest";
import { createEventBatches, type Waiting } from "../../src/waiting-room/event-batches.js";
import { sleep } from "./helpers.js";

interface Sent {
  eventId: string;
  context: string;
  requests: number[];
}

/** A queue whose batches each take `ms`, answering every request with its double. */
function recorder(ms: number, maxBatch = 256, fail?: (batch: number[]) => boolean) {
  const sent: Sent[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const batches = createEventBatches<string, number, number>({
    maxBatch,
    send: async (eventId, context, batch: Waiting<number, number>[]) => {
      const requests = batch.map((w) => w.request);
      sent.push({ eventId, context, requests });
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        await sleep(ms);
        // the first is answered before the failure: it keeps its answer
        batch[0]?.resolve(requests[0]! * 2);
        if (fail?.(requests)) throw new Error(`batch ${requests.join(",")} failed`);
        for (const w of batch.slice(1)) w.resolve(w.request * 2);
      } finally {
        inFlight--;
      }
    },
  });
  return { batches, sent, maxInFlight: () => maxInFlight };
}

describe("per-event batches", () => {
  it("sends an event's requests of one turn together, and what arrives during the round trip as the next batch, in order", async () => {
    const { batches, sent, maxInFlight } = recorder(30);
    const first = [1, 2, 3].map((n) => batches.push("e", "ctx", n));
    await sleep(10); // the first batch is in flight
    const second = [4, 5, 6, 7].map((n) => batches.push("e", "ctx", n));
    expect(await Promise.all([...first, ...second])).toEqual([2, 4, 6, 8, 10, 12, 14]);
    expect(sent.map((s) => s.requests)).toEqual([
      [1, 2, 3],
      [4, 5, 6, 7],
    ]);
    expect(maxInFlight()).toBe(1);
    expect(batches.counters()).toEqual({ batches: 2, joins: 7, largest: 4 });
  });

  it("keeps events apart: each its own batch, in flight at once", async () => {
    const { batches, sent, maxInFlight } = recorder(20);
    await Promise.all([batches.push("a", "ca", 1), batches.push("b", "cb", 2), batches.push("a", "ca", 3)]);
    expect(sent).toEqual([
      { eventId: "a", context: "ca", requests: [1, 3] },
      { eventId: "b", context: "cb", requests: [2] },
    ]);
    expect(maxInFlight()).toBe(2);
  });

  it("splits at maxBatch and sends a batch with the context its latest request brought", async () => {
    const { batches, sent } = recorder(5, 2);
    const answers = await Promise.all([
      batches.push("e", "old", 1),
      batches.push("e", "old", 2),
      batches.push("e", "new", 3),
    ]);
    expect(answers).toEqual([2, 4, 6]);
    expect(sent).toEqual([
      { eventId: "e", context: "new", requests: [1, 2] },
      { eventId: "e", context: "new", requests: [3] },
    ]);
  });

  it("rejects the requests a failed batch left unanswered, keeps those it answered, and goes on", async () => {
    const { batches, sent } = recorder(20, 256, (requests) => requests.includes(2));
    const failed = [1, 2, 3].map((n) => batches.push("e", "ctx", n));
    await sleep(5);
    const next = batches.push("e", "ctx", 4);
    const settled = await Promise.allSettled(failed);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "rejected"]);
    expect((settled[0] as PromiseFulfilledResult<number>).value).toBe(2);
    expect(String((settled[1] as PromiseRejectedResult).reason)).toContain("batch 1,2,3 failed");
    expect(await next).toBe(8);
    expect(sent.map((s) => s.requests)).toEqual([[1, 2, 3], [4]]);
  });
});
