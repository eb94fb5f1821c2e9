/**
 * The lottery page's model and recipe without a browser: the WebCrypto recipe gives the same
 * entries, M, key and order as src/lottery/draw.ts (UTF-8 fan ids, any batch size); the checks
 * agree with verifyDraw on honest and tampered draws; and the model fetches every membership page
 * (with progress), says PASS or which check FAILs and where, finds a fan's place, and puts the
 * gateway's refusals (404, no answer, busy, not drawn) into words.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import * as node from "../../src/lottery/draw.js";
import type { ApiResult } from "../../waiting-room/src/api.js";
import type { Message } from "../../waiting-room/src/format.js";
import {
  type CheckState,
  LotteryModel,
  type LotteryView,
  type PlaceResult,
  type Progress,
  type PublishedLottery,
  progressText,
  type Verdict,
} from "../../waiting-room/src/lottery-model.js";
import * as web from "../../waiting-room/src/lottery-recipe.js";
import { randomnessOf, roundAt } from "../../src/lottery/drand.js";
import { testChain } from "../support/drand-chain.js";
import { FakeApi, noAnswer, ok, refused } from "./fakes.js";

const sha256hex = (s: string) => node.entryOf(s);
const seedOf = () => randomBytes(32).toString("hex");
const immediate: web.Pace = { batch: 64, pause: () => Promise.resolve() };

/** An honest draw of these fans, as the gateway publishes it. */
function honestDraw(fanIds: string[], beacon?: string): node.PublishedDraw {
  const seed = seedOf();
  const entries = fanIds.map(node.entryOf);
  const m = node.membershipHash(entries);
  return {
    commitment: sha256hex(seed),
    seed,
    membershipHash: m,
    ...(beacon === undefined ? {} : { beacon }),
    size: fanIds.length,
    entries: node.drawOrder(node.drawKey(seed, m, beacon ?? ""), entries),
  };
}

const fans = (n: number, tag = randomBytes(3).toString("hex")) =>
  Array.from({ length: n }, (_, i) => `fan-${tag}-${i}`);

/** The same draw tampered with in every way the checks must catch. */
function tamperings(d: node.PublishedDraw): Record<string, node.PublishedDraw> {
  const e = d.entries;
  const intruder = node.entryOf("slipped-in-after-the-close");
  return {
    swapped: { ...d, entries: [e[1]!, e[0]!, ...e.slice(2)] },
    swappedLate: { ...d, entries: [...e.slice(0, 40), e[41]!, e[40]!, ...e.slice(42)] },
    added: { ...d, entries: [intruder, ...e] },
    addedSizeAdjusted: { ...d, size: d.size + 1, entries: [intruder, ...e] },
    removed: { ...d, entries: e.slice(1) },
    replaced: { ...d, entries: [intruder, ...e.slice(1)] },
    wrongSeed: { ...d, seed: seedOf() },
    malformed: { ...d, entries: [e[0]!.toUpperCase(), ...e.slice(1)] },
    duplicated: { ...d, size: d.size + 1, entries: [...e, e[0]!] },
    wrongM: { ...d, membershipHash: node.membershipHash([...e, intruder]) },
  };
}

describe("the page's recipe (WebCrypto) against src/lottery/draw.ts", () => {
  it("gives the same entries for UTF-8 fan ids", async () => {
    const ids = ["fanné", "🎟️ front row", "ファン", "Ω≈ç√", "plain-ascii", "", " spaced "];
    for (const id of ids) expect(await web.entryOf(id)).toBe(node.entryOf(id));
  });

  it("gives the same M, key and order, whatever the batch size", async () => {
    const ids = ["fanné", "🎟️ front row", "ファン", ...fans(700)];
    const entries = ids.map(node.entryOf);
    const seed = seedOf();
    const m = node.membershipHash(entries);
    expect(await web.membershipHash(entries)).toBe(m);
    // M is over the distinct entries, sorted: order and repeats of the input do not matter.
    expect(await web.membershipHash([...entries].reverse().concat(entries.slice(0, 5)))).toBe(m);
    for (const beacon of ["", "drand quicknet 1234:ab12"]) {
      const key = node.drawKey(seed, m, beacon);
      expect(await web.drawKey(seed, m, beacon)).toBe(key);
      const expected = node.drawOrder(key, entries);
      for (const batch of [1, 7, 512, 10_000]) {
        expect(await web.drawOrder(key, entries, { batch, pause: () => Promise.resolve() })).toEqual(expected);
      }
    }
  });

  it("pauses between batches and reports how far it got", async () => {
    const entries = fans(1_000).map(node.entryOf);
    let pauses = 0;
    const seen: number[] = [];
    await web.drawOrder("k", entries, {
      batch: 300,
      pause: async () => {
        pauses++;
      },
      progress: (done, total) => {
        expect(total).toBe(1_000);
        seen.push(done);
      },
    });
    expect(seen).toEqual([300, 600, 900, 1_000]);
    expect(pauses).toBe(3);
  });

  it("checks an honest draw and every tampering as verifyDraw does", async () => {
    const d = honestDraw(fans(300), "beacon-value");
    const honest = await web.checkDraw(d, immediate);
    expect(honest.pass).toBe(true);
    expect(honest.order).toEqual(d.entries);
    for (const [name, t] of Object.entries(tamperings(d))) {
      const mine = await web.checkDraw(t, immediate);
      const theirs = node.verifyDraw(t);
      expect({ name, checks: mine.checks, firstMismatch: mine.firstMismatch }).toEqual({
        name,
        checks: theirs.checks,
        firstMismatch: theirs.firstMismatch,
      });
      expect(mine.pass, name).toBe(false);
    }
  });

  it("names the check that fails for each tampering", async () => {
    const d = honestDraw(fans(300));
    const t = tamperings(d);
    const failed = async (p: node.PublishedDraw) => {
      const c = await web.checkDraw(p, immediate);
      return web.CHECK_NAMES.filter((n) => !c.checks[n]);
    };
    expect(await failed(t.swapped!)).toEqual(["order"]);
    expect((await web.checkDraw(t.swappedLate!, immediate)).firstMismatch).toBe(41);
    expect(await failed(t.addedSizeAdjusted!)).toEqual(["membershipHash", "order"]);
    expect(await failed(t.wrongSeed!)).toEqual(["commitment", "order"]);
    expect(await failed(t.malformed!)).toContain("entriesWellFormed");
    expect(await failed(t.duplicated!)).toContain("entriesWellFormed");
  });
});

// --- the model against a fake gateway ---------------------------------------------------------

const PAGE = 1_000;
const ON_SALE_AT = "2026-12-24T18:00:00.000Z";

type Published = node.PublishedDraw | { commitment: string };

/** The gateway's answer on the two routes, as src/http/routes/queue/{info,lottery}.ts give it. */
function answer(
  d: Published,
  path: string,
  opts: { lottery?: Partial<PublishedLottery> } = {},
): ApiResult<unknown> | undefined {
  if (path.endsWith("/waiting-room")) {
    const lottery: PublishedLottery =
      "seed" in d
        ? {
            commitment: d.commitment,
            seed: d.seed,
            membershipHash: d.membershipHash,
            ...(d.beacon ? { beacon: d.beacon } : {}),
            ...opts.lottery,
            size: d.size,
          }
        : { commitment: d.commitment };
    return ok({ onSaleAt: ON_SALE_AT, state: "seed" in d ? "open" : "prequeue", lottery });
  }
  if (path.includes("/queue/lottery")) {
    if (!("seed" in d)) return refused(409, { code: "not_drawn", message: "the pre-queue has not been drawn yet" });
    const offset = Number(new URL(path, "http://x").searchParams.get("cursor") ?? "0");
    const entries = d.entries.slice(offset, offset + PAGE);
    const end = offset + entries.length;
    return ok({
      size: d.size,
      entries,
      firstPosition: offset + 1,
      ...(entries.length === PAGE && end < d.entries.length ? { next: String(end) } : {}),
    });
  }
  return undefined;
}

const gateway = (d: Published, opts: { lottery?: Partial<PublishedLottery> } = {}) =>
  new FakeApi((call) => answer(d, call.path, opts));

class RecordingView implements LotteryView {
  publishedLottery: PublishedLottery | null = null;
  notDrawnCalls = 0;
  closesAt: number | null = null;
  progresses: Progress[] = [];
  states: Record<string, CheckState>[] = [];
  verdicts: Verdict[] = [];
  places: PlaceResult[] = [];
  messages: (Message | null)[] = [];
  recorded: string | null = null;
  published(l: PublishedLottery, recorded: string | null) {
    this.publishedLottery = l;
    this.recorded = recorded;
  }
  notDrawn(_l: PublishedLottery, onSaleAt: number | null) {
    this.notDrawnCalls++;
    this.closesAt = onSaleAt;
  }
  progress(p: Progress) {
    this.progresses.push(p);
  }
  checks(s: Record<string, CheckState>) {
    this.states.push(s);
  }
  verdict(v: Verdict) {
    this.verdicts.push(v);
  }
  place(r: PlaceResult) {
    this.places.push(r);
  }
  message(m: Message | null) {
    this.messages.push(m);
  }
  get lastMessage(): Message | null {
    return this.messages[this.messages.length - 1] ?? null;
  }
}

function modelFor(
  api: FakeApi,
  eventId = "finals",
  extra: { digestAvailable?: () => boolean; recordedCommitment?: string | null } = {},
) {
  const model = new LotteryModel({ api, eventId, pace: immediate, ...extra });
  const view = new RecordingView();
  model.observe(view);
  return { model, view };
}

describe("the lottery page's model", () => {
  it("fetches every page with progress, passes an honest draw and finds a fan's place", async () => {
    const ids = [...fans(2_499), "ファン 🎟️"];
    const d = honestDraw(ids, "drand-round-9");
    const api = gateway(d);
    const { model, view } = modelFor(api);
    await model.load();

    expect(api.count("/queue/lottery")).toBe(3);
    expect(api.calls.map((c) => c.path)).toEqual([
      "/v1/events/finals/waiting-room",
      "/v1/events/finals/queue/lottery",
      "/v1/events/finals/queue/lottery?cursor=1000",
      "/v1/events/finals/queue/lottery?cursor=2000",
    ]);
    expect(view.publishedLottery?.beacon).toBe("drand-round-9");
    const fetching = view.progresses.filter((p) => p.phase === "fetching");
    expect(fetching).toEqual([
      { phase: "fetching", page: 1, pages: 3, entries: 1_000, size: 2_500 },
      { phase: "fetching", page: 2, pages: 3, entries: 2_000, size: 2_500 },
      { phase: "fetching", page: 3, pages: 3, entries: 2_500, size: 2_500 },
    ]);
    expect(progressText(fetching[1]!)).toBe(
      `Fetching the membership: page 2 of ~3, ${(2_000).toLocaleString()} of ${(2_500).toLocaleString()} entries`,
    );
    const ranking = view.progresses.filter((p) => p.phase === "ranking");
    expect(ranking.length).toBe(Math.ceil(2_500 / immediate.batch));
    expect(ranking[ranking.length - 1]).toEqual({ phase: "ranking", done: 2_500, total: 2_500 });

    expect(view.states[0]).toEqual({
      commitment: "pending",
      entriesWellFormed: "pending",
      size: "pending",
      membershipHash: "pending",
      order: "pending",
    });
    expect(view.states[view.states.length - 1]).toEqual({
      commitment: "pass",
      entriesWellFormed: "pass",
      size: "pass",
      membershipHash: "pass",
      order: "pass",
    });
    expect(view.verdicts).toEqual([{ pass: true, failed: [], firstMismatch: 0, first: d.entries.slice(0, 10) }]);

    for (const fanId of [ids[0]!, ids[1_777]!, "ファン 🎟️"]) {
      const entry = node.entryOf(fanId);
      const position = d.entries.indexOf(entry) + 1;
      expect(position).toBeGreaterThan(0);
      expect(await model.findPlace(fanId)).toEqual({ kind: "found", entry, position, publishedPosition: position });
    }
    expect(await model.findPlace("never-joined")).toEqual({ kind: "absent", entry: node.entryOf("never-joined") });
    expect(await model.findPlace("")).toEqual({ kind: "invalid" });
    expect(view.places.map((p) => p.kind)).toEqual(["found", "found", "found", "absent", "invalid"]);
  });

  it("checks the drand beacon in the browser: the close's round, its BLS signature, B = SHA-256(signature)", async () => {
    const t = testChain();
    const closedAt = "2026-12-24T18:00:00.000Z";
    const round = roundAt(t.chain, Date.parse(closedAt));
    const signed = t.sign(round);
    const drand = { ...t.chain, round, roundAt: closedAt };
    const beacon = randomnessOf(signed.signature);
    const d = honestDraw(fans(50), beacon);
    const honest = modelFor(gateway(d, { lottery: { drand, beaconRound: signed, closedAt } }));
    await honest.model.load();
    expect(honest.view.states[honest.view.states.length - 1]).toMatchObject({ order: "pass", beacon: "pass" });
    expect(honest.view.verdicts[0]).toMatchObject({ pass: true, failed: [] });

    // The same order, drawn from a value the operator picked, or from another round's signature,
    // or signed by another key: the order agrees with its beacon, the beacon check does not.
    const picked = honestDraw(fans(50), "0".repeat(64));
    const other = t.sign(round + 1);
    const impostor = testChain().sign(round);
    const forged = [
      { draw: picked, beaconRound: signed },
      { draw: honestDraw(fans(50), randomnessOf(other.signature)), beaconRound: other },
      { draw: honestDraw(fans(50), randomnessOf(impostor.signature)), beaconRound: impostor },
    ];
    for (const f of forged) {
      const { model, view } = modelFor(gateway(f.draw, { lottery: { drand, beaconRound: f.beaconRound, closedAt } }));
      await model.load();
      const last = view.states[view.states.length - 1]!;
      expect(last).toMatchObject({ order: "pass", beacon: "fail" });
      expect(view.verdicts[0]).toMatchObject({ pass: false, failed: ["beacon"] });
      expect(view.verdicts[0]!.beaconProblem).toBeTruthy();
    }
  });

  it("checks the seed against the commitment this device recorded at join, not the one served now", async () => {
    const d = honestDraw(fans(40));
    const recorded = node.entryOf("the seed committed when the fan joined");
    const { model, view } = modelFor(gateway(d), "finals", { recordedCommitment: recorded });
    await model.load();
    expect(view.recorded).toBe(recorded);
    expect(view.states[view.states.length - 1]).toMatchObject({ commitment: "fail", order: "pass" });
    expect(view.verdicts[0]).toMatchObject({ pass: false, failed: ["commitment"] });
    const same = modelFor(gateway(d), "finals", { recordedCommitment: d.commitment });
    await same.model.load();
    expect(same.view.verdicts[0]).toMatchObject({ pass: true });
  });

  it("a membership tampered with after the draw fails the right check, at the right place", async () => {
    const ids = fans(1_200);
    const d = honestDraw(ids);
    const cases: { name: string; draw: node.PublishedDraw; failed: string[]; firstMismatch: number }[] = [
      // Two fans swapped across the first page boundary (places 1,000 and 1,001).
      {
        name: "swapped",
        draw: {
          ...d,
          entries: [...d.entries.slice(0, 999), d.entries[1_000]!, d.entries[999]!, ...d.entries.slice(1_001)],
        },
        failed: ["order"],
        firstMismatch: 1_000,
      },
      {
        name: "slipped in first",
        draw: { ...d, entries: [node.entryOf("slipped-in"), ...d.entries] },
        failed: ["size", "membershipHash", "order"],
        firstMismatch: 1,
      },
      {
        // The others keep their order among themselves: size and M catch it.
        name: "a fan removed",
        draw: { ...d, entries: d.entries.slice(1) },
        failed: ["size", "membershipHash"],
        firstMismatch: 0,
      },
    ];
    for (const c of cases) {
      const { model, view } = modelFor(gateway(c.draw));
      await model.load();
      const v = view.verdicts[0]!;
      expect({ name: c.name, pass: v.pass, failed: v.failed, firstMismatch: v.firstMismatch }).toEqual({
        name: c.name,
        pass: false,
        failed: c.failed,
        firstMismatch: c.firstMismatch,
      });
      const last = view.states[view.states.length - 1]!;
      for (const name of c.failed) expect(last[name], `${c.name}: ${name}`).toBe("fail");
    }

    // After the swap, the fan moved down is told their drawn place and the place the list gives.
    const swapped = cases[0]!.draw;
    const { model } = modelFor(gateway(swapped));
    await model.load();
    const moved = ids.find((id) => node.entryOf(id) === d.entries[999])!;
    expect(await model.findPlace(moved)).toEqual({
      kind: "found",
      entry: d.entries[999],
      position: 1_000,
      publishedPosition: 1_001,
    });
  });

  it("before the draw: shows the commitment, says it is not drawn, and fetches no membership", async () => {
    const api = gateway({ commitment: sha256hex(seedOf()) });
    const { model, view } = modelFor(api);
    await model.load();
    expect(view.publishedLottery?.seed).toBeUndefined();
    expect(view.notDrawnCalls).toBe(1);
    expect(view.closesAt).toBe(Date.parse(ON_SALE_AT));
    expect(view.verdicts).toEqual([]);
    expect(api.count("/queue/lottery")).toBe(0);
    expect(await model.findPlace("alice")).toEqual({ kind: "not-drawn", entry: node.entryOf("alice") });
  });

  it("a membership refused as not drawn (the draw still running) is 'not drawn', not an error", async () => {
    const d = honestDraw(fans(10));
    const api = new FakeApi((call) =>
      call.path.endsWith("/waiting-room")
        ? ok({ lottery: { commitment: d.commitment, seed: d.seed, membershipHash: d.membershipHash, size: d.size } })
        : refused(409, { code: "not_drawn", message: "the pre-queue has not been drawn yet" }),
    );
    const { model, view } = modelFor(api);
    await model.load();
    expect(view.notDrawnCalls).toBe(1);
    expect(view.messages.filter(Boolean)).toEqual([]);
  });

  it("an unknown event is said in words", async () => {
    const api = new FakeApi(() => refused(404, { code: "not_found", message: "no event nope" }));
    const { model, view } = modelFor(api, "nope");
    await model.load();
    expect(view.lastMessage?.kind).toBe("error");
    expect(view.lastMessage?.title).toBe('There is no on-sale called "nope".');
    expect(await model.findPlace("alice")).toEqual({ kind: "unavailable" });
  });

  it("a gateway that does not answer gets a message with Try again, which picks the check up", async () => {
    const d = honestDraw(fans(1_500));
    let down = true;
    let downAt = "/waiting-room";
    const live = new FakeApi((call) => (down && call.path.includes(downAt) ? noAnswer() : answer(d, call.path)));
    const { model, view } = modelFor(live);
    await model.load();
    expect(view.lastMessage?.title).toBe("We can't reach the box office right now.");
    expect(view.lastMessage?.actions?.map((a) => a.label)).toEqual(["Try again"]);

    // Down again in the middle of the membership: the message names the page.
    downAt = "cursor=1000";
    view.lastMessage!.actions![0]!.run();
    await waitUntil(() => view.messages.length > 2 && view.lastMessage !== null);
    expect(view.lastMessage?.text).toContain("Page 2 of the membership");
    expect(view.verdicts).toEqual([]);

    down = false;
    view.lastMessage!.actions![0]!.run();
    await waitUntil(() => view.verdicts.length === 1);
    expect(view.verdicts[0]!.pass).toBe(true);
    expect(view.lastMessage).toBeNull();
  });

  it("a busy gateway (503) says so and offers to try again", async () => {
    const api = new FakeApi(() => refused(503, { code: "unavailable", message: "retry" }, 2));
    const { model, view } = modelFor(api);
    await model.load();
    expect(view.lastMessage?.kind).toBe("warning");
    expect(view.lastMessage?.title).toBe("The box office is busy.");
    expect(view.lastMessage?.text).toContain("retry in 2 seconds");
  });

  it("a place asked for while the membership is still coming in is answered when it is in", async () => {
    const ids = fans(2_100);
    const d = honestDraw(ids);
    const api = new FakeApi((call) => (call.path.includes("cursor=2000") ? undefined : answer(d, call.path)));
    const { model, view } = modelFor(api);
    const loading = model.load();
    await waitUntil(() => api.pending.length === 1);
    const asked = model.findPlace(ids[5]!);
    await waitUntil(() => view.places.length === 1);
    expect(view.places[0]).toEqual({ kind: "waiting", entry: node.entryOf(ids[5]!) });
    api.take("cursor=2000").answer(answer(d, "/queue/lottery?cursor=2000")!);
    await loading;
    const position = d.entries.indexOf(node.entryOf(ids[5]!)) + 1;
    expect(await asked).toEqual({ kind: "found", entry: node.entryOf(ids[5]!), position, publishedPosition: position });
  });

  it("a place asked for before a failed load is answered by the Try again that follows", async () => {
    const ids = fans(50);
    const d = honestDraw(ids);
    let up = false;
    // Down: the info call hangs until the test answers it "no answer".
    const api = new FakeApi((call) => (up ? answer(d, call.path) : undefined));
    const { model, view } = modelFor(api);
    const failing = model.load();
    const asked = model.findPlace(ids[7]!);
    await waitUntil(() => view.places.length === 1);
    expect(view.places[0]!.kind).toBe("waiting");
    api.take("/waiting-room").answer(noAnswer());
    await failing;
    up = true;
    view.lastMessage!.actions![0]!.run();
    const position = d.entries.indexOf(node.entryOf(ids[7]!)) + 1;
    expect(await asked).toEqual({ kind: "found", entry: node.entryOf(ids[7]!), position, publishedPosition: position });
  });

  it("pages that lead round in a circle end with an error, not a loop", async () => {
    const d = honestDraw(fans(2_500));
    const api = new FakeApi((call) =>
      call.path.endsWith("/waiting-room")
        ? answer(d, call.path)
        : ok({ size: d.size, entries: d.entries.slice(0, PAGE), firstPosition: 1, next: "1000" }),
    );
    const { model, view } = modelFor(api);
    await model.load();
    expect(view.lastMessage?.title).toBe("The membership's pages go round in a circle.");
    expect(api.count("/queue/lottery")).toBe(2);
  });

  it("without WebCrypto, says why and points to the CLI", async () => {
    const d = honestDraw(fans(10));
    const { model, view } = modelFor(gateway(d), "finals", { digestAvailable: () => false });
    await model.load();
    expect(view.lastMessage?.title).toBe("This browser can't compute SHA-256 on this page.");
    expect(view.lastMessage?.text).toContain("npm run verify-lottery");
  });
});

async function waitUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1_000 && !condition(); i++) await new Promise((r) => setTimeout(r, 1));
  expect(condition()).toBe(true);
}
