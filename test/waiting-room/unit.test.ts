/** Pure parts of the waiting room: no I/O. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { scriptOutcome, SCRIPT_OUTCOMES } from "../../src/waiting-room/codes.js";
import { isFanId, lineKeys, waitingRoomKeys } from "../../src/waiting-room/keys.js";
import {
  DRAW_GRACE_MS,
  DRAW_EXPECTED_MS,
  DRAW_MS_PER_FAN,
  DRAW_POLLS_PER_SECOND,
  DRAW_WAIT_POLL_MS,
  DRAW_WAIT_POLLS_PER_SECOND,
  DRAW_WAIT_SPREAD_MS,
  ETA_MARGIN_MS,
  MIN_POLL_MS,
} from "../../src/waiting-room/advice.js";
import { adviseFan, commitmentOf, lotteryOrder, seedMatchesCommitment } from "../../src/waiting-room/index.js";
import { familyScripts, luaDir, readScript } from "../../src/redis/scripts.js";
import { waitingRoomScripts } from "../../src/waiting-room/scripts.js";

describe("keys", () => {
  it("put every key of an event under one hash tag and refuse ids that could break it", () => {
    const keys = Object.values(waitingRoomKeys("Finals_2026"));
    expect(new Set(keys.map((k) => /\{[^}]*\}/.exec(k)?.[0]))).toEqual(new Set(["{evt:Finals_2026}"]));
    expect(new Set(keys).size).toBe(keys.length);
    expect(lineKeys(waitingRoomKeys("x"))).toHaveLength(8);
    for (const bad of ["", "a}b", "a{b", "a:b", "x".repeat(33)]) expect(() => waitingRoomKeys(bad)).toThrow(RangeError);
  });

  it("take any printable fan id of 1..128 characters", () => {
    for (const good of ["a", "fan 42", "fanné", "🎟️", "x".repeat(128)]) expect(isFanId(good)).toBe(true);
    // U+2028/U+2029 break lines; U+FFFD is what invalid UTF-8 in a body decodes to
    for (const bad of [
      "",
      "tab\there",
      "new\nline",
      "\u0000",
      "x".repeat(129),
      "\ud800",
      "a\u2028b",
      "\u2029",
      "qa-\ufffd",
    ])
      expect(isFanId(bad)).toBe(false);
  });
});

describe("scripts", () => {
  it("carry their key count in the file name and inline the core", () => {
    for (const s of familyScripts(waitingRoomScripts)) {
      // `-n`: the caller passes the count (join-batch-n.lua: the line's keys and the batch's buckets)
      if (s.file.endsWith("-n")) expect(s.numberOfKeys).toBeUndefined();
      else expect(s.numberOfKeys).toBeGreaterThan(0);
      expect(s.lua).not.toMatch(/^--- @include/m);
      expect(s.lua).not.toMatch(/\.\.\s*['"]:?\{?evt/); // no key is ever built inside Lua
    }
    const file = waitingRoomScripts.files.status;
    expect(readScript(file)).toBe(readScript(file)); // read once
  });

  it("build the room table from constructors that name exactly SETTINGS and RUNTIME (includes/room.lua)", () => {
    const lua = readFileSync(join(luaDir, "waiting-room", "includes", "room.lua"), "utf8");
    const list = (name: string) => {
      const body = new RegExp(`local ${name} = \\{([^}]*)\\}`).exec(lua)?.[1];
      if (!body) throw new Error(`room.lua has no ${name}`);
      return [...body.matchAll(/'(\w+)'/g)].map((m) => m[1]!);
    };
    const fields = (fn: string) => {
      const body = new RegExp(`local function ${fn}\\(\\)\\s*return \\{([^}]*)\\}`).exec(lua)?.[1];
      if (!body) throw new Error(`room.lua has no ${fn}`);
      return [...body.matchAll(/(\w+) = 0\b/g)].map((m) => m[1]!).sort();
    };
    const settings = list("SETTINGS");
    const runtime = list("RUNTIME");
    expect(settings.length).toBeGreaterThan(5);
    expect(runtime.length).toBeGreaterThan(10);
    expect(fields("new_room")).toEqual([...settings, ...runtime].sort());
    expect(fields("new_saved")).toEqual([...runtime].sort());
  });

  it("map negative codes through one table", () => {
    expect(scriptOutcome(-1)).toBe("not_found");
    expect(scriptOutcome(["status", "waiting"])).toBeNull();
    expect(scriptOutcome(1)).toBeNull();
    expect(() => scriptOutcome(-99)).toThrow();
    expect(new Set(Object.values(SCRIPT_OUTCOMES)).size).toBe(Object.keys(SCRIPT_OUTCOMES).length);
  });
});

describe("lottery recomputation", () => {
  it("commits with SHA-256 of the seed string; the draw order is a permutation of the set", () => {
    const seed = "00".repeat(32);
    expect(commitmentOf(seed)).toBe("60e05bd1b195af2f94112fa7197a5c88289058840ce7c6df9693756bc6250f55");
    expect(seedMatchesCommitment(seed, commitmentOf(seed).toUpperCase())).toBe(true);
    expect(seedMatchesCommitment(seed, commitmentOf("11".repeat(32)))).toBe(false);
    // a duplicate fan counts once; the order is a permutation of the input
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1, maxLength: 20 }), { maxLength: 50 }),
        fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString("hex")),
        (ids, s) => {
          const order = lotteryOrder(s, [...ids, ...ids]);
          expect([...order].sort()).toEqual([...ids].sort());
          expect(lotteryOrder(s, [...ids].reverse())).toEqual(order);
        },
      ),
    );
  });
});

describe("advice to fans", () => {
  const base = { effectiveRate: 10, admitPerSecond: 10, untilOnSaleSeconds: 0, abandonSeconds: 60 };

  it("polls sooner near the front, never later than a third of abandonSeconds, and 1..30 s", () => {
    fc.assert(
      fc.property(
        fc.nat(1_000_000),
        fc.double({ min: 0.01, max: 10_000, noNaN: true }),
        fc.integer({ min: 1, max: 3_600 }),
        (ahead, rate, abandon) => {
          const a = adviseFan({ ...base, status: "waiting", ahead, effectiveRate: rate, abandonSeconds: abandon });
          expect(a.pollAfterSeconds).toBeGreaterThanOrEqual(1);
          expect(a.pollAfterSeconds).toBeLessThanOrEqual(Math.min(30, Math.max(1, Math.floor(abandon / 3))));
          expect(a.etaSeconds).toBe(Math.ceil((ahead + 1) / rate));
          const further = adviseFan({
            ...base,
            status: "waiting",
            ahead: ahead + 1000,
            effectiveRate: rate,
            abandonSeconds: abandon,
          });
          expect(further.pollAfterSeconds).toBeGreaterThanOrEqual(a.pollAfterSeconds);
        },
      ),
    );
  });

  it("has no ETA while nothing is admitted, and counts the wait for the on-sale in the pre-queue", () => {
    expect(adviseFan({ ...base, status: "waiting", ahead: 5, effectiveRate: 0 })).toEqual({
      etaSeconds: null,
      pollAfterSeconds: 10,
    });
    expect(adviseFan({ ...base, status: "prequeue", ahead: 1_000, untilOnSaleSeconds: 120 })).toEqual({
      etaSeconds: 170,
      pollAfterSeconds: 30,
      pollAfterMs: 30_000,
    });
    expect(adviseFan({ ...base, status: "prequeue", ahead: 0, untilOnSaleSeconds: 0.2 }).pollAfterSeconds).toBe(1);
    expect(adviseFan({ ...base, status: "admitted", ahead: 0 }).etaSeconds).toBe(0);
    expect(adviseFan({ ...base, status: "abandoned", ahead: 0 }).etaSeconds).toBeNull();
  });
});

describe("polls scheduled on the ETA", () => {
  const base = { admitPerSecond: 10, untilOnSaleSeconds: 0, abandonSeconds: 60 };

  it("land just after the fan's turn when it is within 30 s, at half the ETA further back, always inside the keep-alive", () => {
    fc.assert(
      fc.property(
        fc.nat(1_000_000),
        fc.double({ min: 0.01, max: 10_000, noNaN: true }),
        fc.integer({ min: 3, max: 3_600 }),
        fc.boolean(),
        (ahead, rate, abandon, roomFull) => {
          const a = adviseFan({
            ...base,
            status: "waiting",
            ahead,
            effectiveRate: rate,
            abandonSeconds: abandon,
            roomFull,
          });
          const untilMs = ((ahead + 1) / rate) * 1000;
          const limitMs = Math.min(30, Math.floor(abandon / 3)) * 1000;
          const minMs = roomFull ? 1000 : MIN_POLL_MS;
          const ms = a.pollAfterMs!;
          expect(ms).toBeGreaterThanOrEqual(Math.min(minMs, limitMs));
          expect(ms).toBeLessThanOrEqual(Math.max(minMs, limitMs));
          if (untilMs + ETA_MARGIN_MS <= limitMs) {
            // within reach: never before the turn, at most the margin (or the floor) after it
            expect(ms).toBeGreaterThanOrEqual(Math.floor(untilMs));
            expect(ms).toBeLessThanOrEqual(Math.max(minMs, Math.ceil(untilMs + ETA_MARGIN_MS)));
          } else {
            expect(ms).toBeLessThanOrEqual(Math.max(minMs, Math.ceil(untilMs / 2)));
          }
        },
      ),
    );
  });

  it("spread the pre-queue's first polls after the draw by its size, and come at no set time while paused or done", () => {
    const at = (random: number, ahead: number) =>
      adviseFan({ ...base, status: "prequeue", ahead, untilOnSaleSeconds: 2, effectiveRate: 0, random }).pollAfterMs!;
    expect(at(0, 999)).toBe(2_000 + ETA_MARGIN_MS);
    expect(at(0.999_999, 999)).toBe(
      Math.round(2_000 + ETA_MARGIN_MS + (1_000 / DRAW_POLLS_PER_SECOND) * 1000 * 0.999_999),
    );
    expect(at(0.5, 99_999) - at(0, 99_999)).toBe(Math.round((100_000 / DRAW_POLLS_PER_SECOND) * 1000 * 0.5));
    expect(adviseFan({ ...base, status: "waiting", ahead: 5, effectiveRate: 0 }).pollAfterMs).toBeUndefined();
    expect(adviseFan({ ...base, status: "admitted", ahead: 0, effectiveRate: 10 }).pollAfterMs).toBeUndefined();
    expect(adviseFan({ ...base, status: "expired", ahead: 0, effectiveRate: 10 }).pollAfterMs).toBeUndefined();
  });
});

describe("advice while the draw is pending (issue 28 item 7)", () => {
  const base = { status: "prequeue" as const, effectiveRate: 0, admitPerSecond: 10, untilOnSaleSeconds: 0 };
  const expectedMs = (fans: number) => DRAW_EXPECTED_MS + fans * DRAW_MS_PER_FAN;

  it("a draw waiting for its beacon: no ETA, polls 2-5 s apart for a small pre-queue, not 100 ms and 1 s", () => {
    // The client: ten pre-queued fans at 10 a second, the draw waiting for its beacon.
    const at = (random: number) => adviseFan({ ...base, ahead: 9, abandonSeconds: 60, drawPendingMs: 5_000, random });
    expect(at(0)).toEqual({ etaSeconds: null, pollAfterSeconds: 4, pollAfterMs: DRAW_WAIT_POLL_MS });
    expect(at(0.5).pollAfterMs).toBe(DRAW_WAIT_POLL_MS + DRAW_WAIT_SPREAD_MS / 2);
    expect(at(0.999_999).pollAfterMs).toBe(DRAW_WAIT_POLL_MS + DRAW_WAIT_SPREAD_MS);
    // The same fan before the fix was told 100 ms and an ETA of 1 s (what the on-sale branch says).
    expect(adviseFan({ ...base, ahead: 9, abandonSeconds: 60, random: 0 })).toMatchObject({
      etaSeconds: 1,
      pollAfterMs: MIN_POLL_MS,
    });
  });

  it("spreads a large pre-queue's polls wider, keeps them under 5,000 a second, and always inside the keep-alive", () => {
    fc.assert(
      fc.property(
        fc.nat(2_000_000),
        fc.integer({ min: 1, max: 3_600 }),
        fc.double({ min: 0, max: 0.999_999, noNaN: true }),
        fc.nat(600_000),
        (ahead, abandon, random, late) => {
          const fans = ahead + 1;
          const a = adviseFan({
            ...base,
            ahead,
            abandonSeconds: abandon,
            drawPendingMs: expectedMs(fans) + late,
            random,
          });
          const limitMs = Math.min(30, Math.max(1, Math.floor(abandon / 3))) * 1000;
          const spreadMs = Math.max(DRAW_WAIT_SPREAD_MS, (fans / DRAW_WAIT_POLLS_PER_SECOND) * 1000);
          expect(a.etaSeconds).toBeNull();
          expect(a.pollAfterMs).toBeGreaterThanOrEqual(Math.min(DRAW_WAIT_POLL_MS, limitMs));
          expect(a.pollAfterMs).toBeLessThanOrEqual(limitMs);
          expect(a.pollAfterMs).toBe(Math.round(Math.min(limitMs, DRAW_WAIT_POLL_MS + spreadMs * random)));
          expect(a.pollAfterSeconds).toBeGreaterThanOrEqual(1);
          expect(a.pollAfterSeconds * 1000).toBeLessThanOrEqual(limitMs);
          // Uncapped, a fan polls on average DRAW_WAIT_POLL_MS + half the spread apart: the whole
          // pre-queue under 5,000 polls a second.
          if (DRAW_WAIT_POLL_MS + spreadMs <= limitMs) {
            expect(fans / ((DRAW_WAIT_POLL_MS + spreadMs / 2) / 1000)).toBeLessThan(5_000);
          }
        },
      ),
    );
  });

  it("counts the grace a room with its records on the fan shards waits before its draw, not overdue in it", () => {
    // 10 fans, the close 100 ms ago: the draw starts 2 s after the close, done about 250 ms later.
    const graced = (pendingMs: number) =>
      adviseFan({
        ...base,
        ahead: 9,
        abandonSeconds: 60,
        drawPendingMs: pendingMs,
        drawGraceMs: DRAW_GRACE_MS,
        random: 0,
      });
    const leftMs = DRAW_GRACE_MS + expectedMs(10) - 100;
    expect(graced(100)).toEqual({
      etaSeconds: Math.ceil(leftMs / 1000 + 9 / 2 / 10),
      pollAfterSeconds: Math.ceil(leftMs / 1000),
      pollAfterMs: Math.round(leftMs + ETA_MARGIN_MS),
    });
    // the same fan without the grace was told the draw was overdue: come back in 2-5 s
    expect(adviseFan({ ...base, ahead: 9, abandonSeconds: 60, drawPendingMs: 400, random: 0 }).etaSeconds).toBeNull();
    expect(graced(400).pollAfterMs).toBe(Math.round(DRAW_GRACE_MS + expectedMs(10) - 400 + ETA_MARGIN_MS));
    // past the grace and the draw's expected time, overdue as in any room
    expect(graced(DRAW_GRACE_MS + expectedMs(10) + 1)).toMatchObject({
      etaSeconds: null,
      pollAfterMs: DRAW_WAIT_POLL_MS,
    });
  });

  it("while a draw with no beacon should still be running, polls again as it ends, spread as at the on-sale", () => {
    // 1,000 fans, the close 20 ms ago: the draw is expected done 280 ms after the close.
    const at = (random: number) => adviseFan({ ...base, ahead: 999, abandonSeconds: 60, drawPendingMs: 20, random });
    const leftMs = expectedMs(1_000) - 20;
    expect(at(0)).toEqual({
      etaSeconds: Math.ceil(leftMs / 1000 + 999 / 2 / 10),
      pollAfterSeconds: 1,
      pollAfterMs: Math.round(leftMs + ETA_MARGIN_MS),
    });
    expect(at(0.5).pollAfterMs).toBe(Math.round(leftMs + ETA_MARGIN_MS + (1_000 / DRAW_POLLS_PER_SECOND) * 1000 * 0.5));
    // Prompt: well under a second for a small pre-queue, and one poll later the draw is overdue.
    expect(at(0.999_999).pollAfterMs).toBeLessThan(1_000);
    expect(
      adviseFan({ ...base, ahead: 999, abandonSeconds: 60, drawPendingMs: 20 + at(0).pollAfterMs!, random: 0 })
        .pollAfterMs,
    ).toBe(DRAW_WAIT_POLL_MS);
    // A million fans: the draw takes seconds; the poll waits for it, inside the keep-alive.
    const big = adviseFan({ ...base, ahead: 999_999, abandonSeconds: 60, drawPendingMs: 0, random: 0 });
    expect(big.pollAfterMs).toBe(20_000);
    expect(big.etaSeconds).toBeGreaterThan(50_000);
    // Nothing admitted: no ETA, the same poll.
    expect(
      adviseFan({ ...base, admitPerSecond: 0, ahead: 9, abandonSeconds: 60, drawPendingMs: 0 }).etaSeconds,
    ).toBeNull();
  });
});
