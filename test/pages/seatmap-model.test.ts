/**
 * The seat map's model without a browser: the live stream (counts, the backlog while a section
 * loads, the re-read after a reconnect), the picking rules and the hold request's outcomes.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Message } from "../../waiting-room/src/format.js";
import { SeatMapModel, type SeatMapObserver } from "../../waiting-room/src/seatmap-model.js";
import type { CompactSectionSeats, Hold, SeatMapSummary } from "../../waiting-room/src/types.js";
import { FakeApi, FakeStream, ok, refused, settle } from "./fakes.js";

const SUMMARY: SeatMapSummary = {
  eventId: "evt",
  name: "Finals",
  maxSeatsPerFan: 3,
  sections: [
    { id: "A", tier: "Floor", price: 15000, available: 7, total: 8 },
    { id: "B", tier: "Upper", price: 5000, available: 6, total: 6 },
  ],
  generalAdmission: [{ id: "GA", tier: "Standing", price: 6000, available: 40, capacity: 40 }],
};

/** Section A: two rows of four, A-2-4 held. */
const SECTION_A: CompactSectionSeats = {
  sectionId: "A",
  version: "1",
  layout: [
    [1, 1, 4],
    [2, 1, 4],
  ],
  status: "aaaaaaah",
};
const SECTION_B: CompactSectionSeats = { sectionId: "B", version: "1", layout: [[1, 1, 6]], status: "aaaaaa" };

class Recorder implements SeatMapObserver {
  readonly events: string[] = [];
  readonly messages: Message[] = [];
  readonly lostSeats: { ids: string[]; suggestions: string[] }[] = [];
  live = (state: string) => void this.events.push(`live:${state}`);
  summaryLoaded = () => void this.events.push("summary");
  sectionCount = (id: string) => void this.events.push(`count:${id}`);
  sectionOpening = (s: { id: string }, switching: boolean) => void this.events.push(`opening:${s.id}:${switching}`);
  sectionFailed = (m: string) => void this.events.push(`failed:${m}`);
  sectionLoaded = (keepFocus: boolean) => void this.events.push(`loaded:${keepFocus}`);
  seat = (id: string) => void this.events.push(`seat:${id}`);
  selection = () => void this.events.push("selection");
  message = (m: Message) => void this.messages.push(m);
  lost = (ids: string[], suggestions: string[]) => void this.lostSeats.push({ ids, suggestions });
}

const models: SeatMapModel[] = [];
afterEach(() => {
  for (const m of models.splice(0)) m.close();
});

/** A model whose API answers the summary and sections at once unless `hold` names a path to hold back. */
function setup(options: { token?: string | undefined; holdBack?: string[] } = {}) {
  const held: Hold[] = [];
  const ended: string[] = [];
  /** What a read of each section returns; a test may change it. */
  const bodies: Record<string, CompactSectionSeats> = { A: SECTION_A, B: SECTION_B };
  const api = new FakeApi(({ path }) => {
    if (options.holdBack?.some((f) => path.includes(f))) return undefined;
    if (path.endsWith("/seatmap")) return ok(structuredClone(SUMMARY));
    const section = /\/sections\/(\w+)\/seats\?format=compact$/.exec(path)?.[1];
    const body = section ? bodies[section] : undefined;
    return body ? ok(structuredClone(body)) : undefined;
  });
  const stream = new FakeStream();
  const model = new SeatMapModel({
    api,
    eventId: "evt",
    openStream: stream.open,
    accessToken: () => ("token" in options ? options.token : "access-token"),
    onHeld: (hold) => held.push(hold),
    onSessionEnded: (reason) => ended.push(reason),
  });
  const view = new Recorder();
  model.observe(view);
  models.push(model);
  return { api, bodies, stream, model, view, held, ended };
}

async function openA(s: ReturnType<typeof setup>) {
  await s.model.open();
  await s.model.openSection("A");
}

const sectionA = () => SUMMARY.sections[0]!;
const sectionB = () => SUMMARY.sections[1]!;

describe("the seat map model: the live stream", () => {
  it("opens the stream before reading the summary, and re-reads both only after a reconnect", async () => {
    const s = setup();
    await openA(s);
    expect(s.stream.url).toBe("http://gateway.test/v1/events/evt/seatmap/stream");
    expect(s.view.events[0]).toBe("live:connecting");
    expect(s.api.count("/seatmap")).toBe(1);

    s.stream.handlers!.ready();
    await settle();
    expect(s.view.events.at(-1)).toBe("live:live");
    expect(s.api.count("/seatmap")).toBe(1); // the first ready: nothing was missed

    s.stream.handlers!.error(false);
    expect(s.view.events.at(-1)).toBe("live:connecting");
    s.stream.handlers!.ready();
    await settle();
    // Changes may have been missed while reconnecting: the truth is read again.
    expect(s.api.count("/seatmap")).toBe(2);
    expect(s.api.count("/sections/A/seats")).toBe(2);
    expect(s.view.events).toContain("loaded:true");

    s.stream.handlers!.error(true);
    expect(s.view.events.at(-1)).toBe("live:off");
  });

  it("keeps the open section's count exact and infers the others' from how seats move", async () => {
    const s = setup();
    await openA(s);
    expect(s.model.availableIn(sectionA())).toBe(7);

    s.stream.seat("A-1-1", "held");
    s.stream.seat("A-1-1", "held"); // the same news twice counts once
    expect(s.model.availableIn(sectionA())).toBe(6);
    expect(s.model.statusOf("A-1-1")).toBe("held");
    s.stream.seat("A-2-4", "sold"); // held to sold: no change in what is left
    expect(s.model.availableIn(sectionA())).toBe(6);
    s.stream.seat("A-1-1", "available");
    expect(s.model.availableIn(sectionA())).toBe(7);

    // Section B is not open: held means one fewer, available one more, sold (from held) none.
    s.stream.seat("B-1-1", "held");
    s.stream.seat("B-1-2", "held");
    s.stream.seat("B-1-1", "sold");
    s.stream.seat("B-1-2", "available");
    expect(s.model.availableIn(sectionB())).toBe(5);
    expect(s.model.statusOf("B-1-1")).toBeUndefined();
  });

  it("ignores malformed events", async () => {
    const s = setup();
    await openA(s);
    const before = s.view.events.length;
    s.stream.handlers!.seat("not json");
    s.stream.handlers!.seat(JSON.stringify({ id: "A-1-1", status: "gone" }));
    s.stream.handlers!.seat(JSON.stringify({ id: "nonsense", status: "held" }));
    s.stream.handlers!.seat("null");
    expect(s.view.events.length).toBe(before);
    expect(s.model.statusOf("A-1-1")).toBe("available");
  });

  it("applies the changes that arrive while a section loads over what the read returns", async () => {
    const s = setup({ holdBack: ["/sections/A/seats"] });
    await s.model.open();
    const opening = s.model.openSection("A");
    await settle();
    // The read was answered before these changes were published: the body does not have them.
    s.stream.seat("A-1-2", "held");
    s.stream.seat("A-2-4", "available");
    s.stream.seat("B-1-1", "held"); // another section: counted, not buffered
    s.api.take("/sections/A/seats").answer(ok(structuredClone(SECTION_A)));
    await opening;
    expect(s.model.statusOf("A-1-2")).toBe("held");
    expect(s.model.statusOf("A-2-4")).toBe("available");
    expect(s.model.statusOf("B-1-1")).toBeUndefined();
    expect(s.model.availableIn(sectionA())).toBe(7);
    expect(s.model.availableIn(sectionB())).toBe(5);
    expect(s.model.rows.map((r) => r.label)).toEqual(["1", "2"]);
  });

  it("drops the answer for a section the fan has since left", async () => {
    const s = setup({ holdBack: ["/sections/"] });
    await s.model.open();
    const first = s.model.openSection("A");
    const second = s.model.openSection("B");
    s.api.take("/sections/B/seats").answer(ok(structuredClone(SECTION_B)));
    await second;
    s.api.take("/sections/A/seats").answer(ok(structuredClone(SECTION_A)));
    await first;
    expect(s.model.openSectionId).toBe("B");
    expect(s.model.statusOf("A-1-1")).toBeUndefined();
    expect(s.model.rows.flatMap((r) => r.seats)).toHaveLength(6);
  });

  it("closing the map closes the stream and says live updates are off", async () => {
    const s = setup();
    await openA(s);
    s.model.close();
    expect(s.stream.closed).toBe(1);
    expect(s.view.events.at(-1)).toBe("live:off");
    await s.model.open();
    expect(s.stream.opened).toBe(2);
  });
});

describe("the seat map model: picks", () => {
  it("picks only available seats, up to maxSeatsPerFan, each at its section's price", async () => {
    const s = setup();
    await openA(s);
    s.model.toggle("A-2-4");
    expect(s.model.isSelected("A-2-4")).toBe(false);
    expect(s.view.messages.at(-1)?.title).toBe("Section A, row 2, seat 4 is held by another fan.");

    for (const id of ["A-1-1", "A-1-2", "A-1-3"]) s.model.toggle(id);
    s.model.toggle("A-1-4");
    expect(s.model.selectedIds).toEqual(["A-1-1", "A-1-2", "A-1-3"]);
    expect(s.view.messages.at(-1)?.title).toBe("You can pick up to 3 seats.");
    expect(s.model.selectedTotal).toBe(45000);

    s.model.toggle("A-1-2"); // a second click unpicks
    expect(s.model.selectedIds).toEqual(["A-1-1", "A-1-3"]);
    s.model.clearSelection();
    expect(s.model.selectedIds).toEqual([]);
    expect(s.view.events.slice(-3)).toEqual(["seat:A-1-1", "seat:A-1-3", "selection"]);
  });

  it("a pick another fan takes is dropped and the nearest free seats are offered", async () => {
    const s = setup();
    await openA(s);
    s.model.toggle("A-1-2");
    s.stream.seat("A-1-2", "held");
    expect(s.model.selectedIds).toEqual([]);
    expect(s.view.lostSeats).toEqual([{ ids: ["A-1-2"], suggestions: ["A-1-1"] }]);

    s.model.pickSuggested(["A-1-1"]);
    expect(s.model.selectedIds).toEqual(["A-1-1"]);
    expect(s.view.messages.at(-1)?.title).toBe("Picked A-1-1.");

    // An offered seat gone by the time it is picked is said so, with the next nearest.
    s.stream.seat("A-1-3", "held");
    s.model.pickSuggested(["A-1-3"]);
    expect(s.view.lostSeats.at(-1)).toEqual({ ids: ["A-1-3"], suggestions: ["A-1-4"] });
  });

  it("the nearest free seats are in the same row first, then the rows next to it", async () => {
    const s = setup();
    await openA(s);
    s.stream.seat("A-1-1", "held");
    s.stream.seat("A-1-2", "held");
    s.stream.seat("A-1-3", "held");
    expect(s.model.nearestFree(["A-1-2"], 2)).toEqual(["A-1-4", "A-2-2"]);
    expect(s.model.nearestFree(["A-1-2"], 0)).toEqual([]);
    expect(s.model.nearestFree(["B-1-1"], 2)).toEqual([]); // not on screen
  });

  it("a pick taken while the section was closed is dropped when it is opened again", async () => {
    const s = setup();
    await openA(s);
    s.model.toggle("A-1-1");
    await s.model.openSection("B");
    // Another fan took A-1-1 while A was closed and no event named it: the next read says so.
    s.bodies.A = { ...SECTION_A, status: `h${SECTION_A.status.slice(1)}` };
    await s.model.openSection("A");
    expect(s.model.selectedIds).toEqual([]);
    expect(s.view.lostSeats.at(-1)?.ids).toEqual(["A-1-1"]);
  });
});

describe("the seat map model: the hold request", () => {
  const hold: Hold = { holdId: "h1", seats: ["A-1-1"], expiresAt: "2030-01-01T00:00:00Z", amount: 15000 };

  it("sends the picks with the access token and hands the hold on", async () => {
    const s = setup({ holdBack: ["/holds"] });
    await openA(s);
    s.model.toggle("A-1-1");
    const holding = s.model.holdSelected();
    expect(s.model.holding).toBe(true);
    s.model.toggle("A-1-2"); // no changes while the request is out
    expect(s.model.selectedIds).toEqual(["A-1-1"]);
    // Our own hold shows on the stream before the answer: not a loss.
    s.stream.seat("A-1-1", "held");
    expect(s.view.lostSeats).toEqual([]);
    const call = s.api.take("/holds");
    expect(call.method).toBe("POST");
    expect(call.options).toMatchObject({ token: "access-token", json: { seats: ["A-1-1"] } });
    call.answer(ok(hold, 201));
    await holding;
    expect(s.model.holding).toBe(false);
    expect(s.held).toEqual([hold]);
  });

  it("a lost race drops the seats it names, shows them held and offers others", async () => {
    const s = setup({ holdBack: ["/holds"] });
    await openA(s);
    s.model.toggle("A-1-1");
    s.model.toggle("A-1-4");
    const holding = s.model.holdSelected();
    s.api
      .take("/holds")
      .answer(refused(409, { code: "seat_unavailable", message: "taken", details: { seats: ["A-1-1"] } }));
    await holding;
    expect(s.model.selectedIds).toEqual(["A-1-4"]);
    expect(s.model.statusOf("A-1-1")).toBe("held");
    expect(s.model.availableIn(sectionA())).toBe(6);
    expect(s.view.lostSeats).toEqual([{ ids: ["A-1-1"], suggestions: ["A-1-2"] }]);
  });

  it("standing places: the quantity is checked first, a shortage re-reads the summary", async () => {
    const s = setup({ holdBack: ["/holds"] });
    await s.model.open();
    await s.model.holdArea("GA", 0);
    expect(s.view.messages.at(-1)?.title).toBe("Choose how many standing places you want (at least 1).");
    await s.model.holdArea("GA", 4);
    expect(s.view.messages.at(-1)?.title).toBe("You can hold up to 3 places.");
    expect(s.api.count("/holds")).toBe(0);

    const holding = s.model.holdArea("GA", 2);
    const call = s.api.take("/holds");
    expect(call.options.json).toEqual({ generalAdmission: { id: "GA", quantity: 2 } });
    call.answer(refused(409, { code: "seat_unavailable", message: "short", details: { available: 1 } }));
    await holding;
    expect(s.view.messages.at(-1)).toMatchObject({
      title: "Only 1 place left there now.",
      text: "Try a smaller number.",
    });
    expect(s.api.count("/seatmap")).toBe(2);
  });

  it("best available: the quantity is checked first, the request names where, a refusal is explained", async () => {
    const s = setup({ holdBack: ["/holds"] });
    await s.model.open();
    await s.model.holdBest(0, {});
    expect(s.view.messages.at(-1)?.title).toBe("Choose how many seats you want together (at least 1).");
    await s.model.holdBest(4, { tier: "Floor" });
    expect(s.view.messages.at(-1)?.title).toBe("You can hold up to 3 seats.");
    expect(s.api.count("/holds")).toBe(0);

    const first = s.model.holdBest(2, { tier: "Floor" }, true);
    const call = s.api.take("/holds");
    expect(call.options).toMatchObject({
      token: "access-token",
      json: { best: { quantity: 2, tier: "Floor", splitRows: true } },
    });
    call.answer(refused(409, { code: "no_block_available", message: "none", details: { available: 3 } }));
    await first;
    expect(s.view.messages.at(-1)).toMatchObject({ title: "No seats together there right now." });
    expect(s.view.messages.at(-1)?.text).toContain("3 seats left there, but not side by side");
    expect(s.api.count("/seatmap")).toBe(2);

    const second = s.model.holdBest(2, { section: "B" });
    const next = s.api.take("/holds");
    expect(next.options.json).toEqual({ best: { quantity: 2, section: "B" } });
    next.answer(ok(hold, 201));
    await second;
    expect(s.held).toEqual([hold]);
  });

  it("no token or a refused one ends the session; other refusals are said", async () => {
    const none = setup({ token: undefined });
    await openA(none);
    none.model.toggle("A-1-1");
    await none.model.holdSelected();
    expect(none.ended).toEqual(["Your shopping session has ended."]);
    expect(none.api.count("/holds")).toBe(0);

    const s = setup({ holdBack: ["/holds"] });
    await openA(s);
    s.model.toggle("A-1-1");
    const cases = [
      [refused(401, { code: "unauthenticated", message: "no" }), null],
      [refused(429, { code: "rate_limited", message: "slow" }, 4), "Too many tries at once; try again in 4 s."],
      [refused(0, { code: "network", message: "x" }), "Check your connection and try again; nothing was held."],
      [refused(500, { code: "internal", message: "boom" }), "boom. Please try again."],
    ] as const;
    for (const [answer, text] of cases) {
      const holding = s.model.holdSelected();
      s.api.take("/holds").answer(answer);
      await holding;
      if (text) expect(s.view.messages.at(-1)?.text).toBe(text);
    }
    expect(s.ended).toEqual(["Your shopping session has ended."]);
    expect(s.model.selectedIds).toEqual(["A-1-1"]);
  });
});
