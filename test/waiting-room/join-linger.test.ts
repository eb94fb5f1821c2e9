/**
 * When the join batcher sends (src/waiting-room/join-batch.ts): the policy alone, with a script
 * runner that records each batch and answers at once. Redis's part (the places, their order) is
 * test/waiting-room/join-batch.test.ts, against a real server.
 */
import { describe, expect, it } from "vitest";
import { type BatchedJoin, createJoinBatcher } from "../../src/waiting-room/join-batch.js";

const join = (fanId: string): BatchedJoin => ({ fanId, bucket: "", limit: [0, 0], proofBits: 0, invite: false });
const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/** A runner that records each batch's fans and answers each fan ['join'] (join-9's to hand over). */
function recording() {
  const batches: { at: number; fans: string[] }[] = [];
  const run = async (_name: string, _keys: string[], args: (string | number)[]) => {
    // join-batch-n.lua's ARGV: n, m buckets, w arguments a fan, s limits, their rates and bursts,
    // each bucket's limit when s > 1, then w a fan
    const [n, m, w, s] = [Number(args[0]), Number(args[1]), Number(args[2]), Number(args[3])];
    const first = 4 + 2 * s + (s > 1 ? m : 0);
    const fans = Array.from({ length: n }, (_, i) => String(args[first + i * w]));
    batches.push({ at: performance.now(), fans });
    return [[], ...fans.map(() => ["join"])];
  };
  return { batches, run: run as never };
}

describe("the join batcher's linger", () => {
  it("a lone join goes at once; while joins keep coming, one arriving alone waits for others", async () => {
    const { batches, run } = recording();
    const b = createJoinBatcher(run, { lingerMs: 40, lingerFull: 100 });
    const started = performance.now();
    await b.join("e", [], join("first"));
    expect(performance.now() - started).toBeLessThan(40); // nothing sent lately: no linger
    await tick(); // the batch's round trip is over (what arrives during one is the next batch)
    // Busy now: three joins, each in its own turn of the event loop, within the linger.
    const pending = [b.join("e", [], join("a"))];
    await tick();
    pending.push(b.join("e", [], join("b")));
    await tick();
    pending.push(b.join("e", [], join("c")));
    await Promise.all(pending);
    expect(batches.map((x) => x.fans)).toEqual([["first"], ["a", "b", "c"]]);
  });

  it("a lingering batch goes as soon as it is full enough, not at the linger's end", { timeout: 20_000 }, async () => {
    const { batches, run } = recording();
    const b = createJoinBatcher(run, { lingerMs: 60_000, lingerFull: 4 });
    await b.join("e", [], join("first"));
    await tick();
    const lingering = performance.now();
    const pending: Promise<unknown>[] = [];
    for (const fan of ["a", "b", "c", "d"]) {
      pending.push(b.join("e", [], join(fan)));
      await tick();
    }
    await Promise.all(pending); // without the early send a minute's linger times the test out
    expect(batches.map((x) => x.fans)).toEqual([["first"], ["a", "b", "c", "d"]]);
    expect(batches[1]!.at - lingering).toBeLessThan(10_000);
  });

  it("joins of another event never fill this event's batch", async () => {
    const { batches, run } = recording();
    const b = createJoinBatcher(run, { lingerMs: 30, lingerFull: 2 });
    await b.join("e", [], join("first"));
    await tick();
    const pending = [b.join("e", [], join("a")), b.join("other", [], join("x")), b.join("other", [], join("y"))];
    await Promise.all(pending);
    const ofE = batches.filter((x) => x.fans.includes("a"));
    expect(ofE).toEqual([expect.objectContaining({ fans: ["a"] })]);
  });
});
