/**
 * The fan page's model without a browser: its stages and the moves between them, the poll's
 * back-off and re-join, the line restarted after a failure, the payment's Idempotency-Key rule
 * and a pending purchase followed to its end.
 */
import { createHash } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type CheckoutPhase, FanModel, type FanView, NEXT, type Stage } from "../../waiting-room/src/fan-model.js";
import type { FanSession } from "../../waiting-room/src/fan-session.js";
import type { Message } from "../../waiting-room/src/format.js";
import type { Hold, PowSolver, QueueStatus, WaitingRoomInfo } from "../../waiting-room/src/types.js";
import { type Call, FakeApi, noAnswer, ok, refused } from "./fakes.js";

const NOW = Date.parse("2030-06-01T12:00:00Z");
const later = (seconds: number) => new Date(NOW + seconds * 1000).toISOString();
const SEED = "5eed".repeat(16);
const INFO: WaitingRoomInfo = {
  onSaleAt: later(-60),
  state: "open",
  waiting: 3,
  admitPerSecond: 5,
  lottery: { commitment: createHash("sha256").update(SEED).digest("hex"), seed: SEED },
};
const HOLD: Hold = { holdId: "h1", seats: ["A-1-1", "A-1-2"], expiresAt: later(120), amount: 30000 };

const waiting = (ahead: number, extra: Partial<QueueStatus> = {}): QueueStatus => ({
  status: "waiting",
  position: ahead + 1,
  ahead,
  etaSeconds: 10,
  pollAfterSeconds: 2,
  ...extra,
});

class Recorder implements FanView {
  readonly stages: Stage[] = [];
  readonly phases: CheckoutPhase[] = [];
  readonly messages: (Message | null)[] = [];
  readonly places: [string, number][] = [];
  seed: boolean | null | undefined;
  show = (stage: Stage) => void this.stages.push(stage);
  checkoutPhase = (phase: CheckoutPhase) => void this.phases.push(phase);
  readonly joinDisabled: boolean[] = [];
  joining = (busy: boolean) => void this.joinDisabled.push(busy);
  place = (p: QueueStatus, progress: number) => void this.places.push([p.status, progress]);
  lottery = () => {};
  seedChecked = (matches: boolean | null) => {
    this.seed = matches;
  };
  countdown = () => {};
  sessionClock = () => {};
  holdClock = () => {};
  eventName = () => {};
  message = (m: Message) => void this.messages.push(m);
  clearMessage = () => void this.messages.push(null);
  focusPaymentChoice = () => {};
  get lastMessage() {
    return this.messages.at(-1);
  }
}

function setup(
  saved: FanSession | null = null,
  line: { info?: WaitingRoomInfo; invite?: string; solver?: PowSolver } = {},
) {
  const store = {
    saved,
    /** The fan id this device keeps for the event (localStorage in the page). */
    fanId: null as string | null,
    savedFanId: () => store.fanId,
    rememberFanId: (fanId: string | null) => {
      store.fanId = fanId;
    },
    load: () => store.saved,
    save: (s: FanSession) => {
      store.saved = structuredClone(s);
    },
    clear: () => {
      store.saved = null;
    },
  };
  const api = new FakeApi((call) => (call.path.endsWith("/waiting-room") ? ok(line.info ?? INFO) : undefined));
  api.setNow(NOW);
  const seatMap = { open: vi.fn(async () => {}), close: vi.fn(), clearSelection: vi.fn(), eventName: "Finals" };
  const model = new FanModel({ api, eventId: "evt", store, seatMap, invite: line.invite, solver: line.solver });
  const view = new Recorder();
  model.observe(view);
  return { api, store, seatMap, model, view };
}

/** Lets timers run and every promise they start settle. */
const elapse = (ms: number) => vi.advanceTimersByTimeAsync(ms);

beforeEach(() => {
  vi.useFakeTimers({ now: NOW });
});
afterEach(() => {
  vi.useRealTimers();
});

describe("the fan page's stages", () => {
  it("every stage can be reached, and none but the start's moves lead back to boot", () => {
    const reachable = new Set<Stage>(["boot"]);
    for (const targets of Object.values(NEXT)) for (const t of targets) reachable.add(t);
    expect([...reachable].sort()).toEqual(["boot", "checkout", "done", "map", "start", "wait"]);
    expect(Object.values(NEXT).some((targets) => targets.includes("boot"))).toBe(false);
  });

  it("a closed line says so on the start and offers no join, but a browser that joined before keeps its button", async () => {
    const closed = { ...INFO, state: "closed" as const };
    const s = setup(null, { info: closed });
    s.model.resume();
    await elapse(0);
    expect(s.view.stages).toEqual(["start"]);
    expect(s.view.joinDisabled).toEqual([true]);
    expect(s.view.lastMessage).toMatchObject({ kind: "warning", title: "This line is closed." });

    const back = setup(null, { info: closed });
    back.store.fanId = "f.kept";
    back.model.resume();
    await elapse(0);
    expect(back.view.joinDisabled).toEqual([]);
    expect(back.view.lastMessage?.text).toMatch(/Join again/);
  });

  it("start → wait → map: joins, polls at the pace asked, and moves on when admitted", async () => {
    const s = setup();
    s.model.resume();
    expect(s.view.stages).toEqual(["start"]);
    const join = s.model.begin("fan-1");
    const joinCall = s.api.take("/queue");
    expect(joinCall.options.json).toEqual({ fanId: "fan-1" });
    joinCall.answer(ok({ queueToken: "q1", position: 3, status: "waiting", ahead: 2, pollAfterSeconds: 2 }, 201));
    await join;
    expect(s.view.stages).toEqual(["start", "wait"]);
    expect(s.store.saved?.queueToken).toBe("q1");

    await elapse(1_900);
    expect(s.api.count("/queue/status")).toBe(0); // never sooner than asked
    await elapse(300);
    const poll = s.api.take("/queue/status");
    expect(poll.options.token).toBe("q1");
    poll.answer(ok(waiting(1)));
    await elapse(2_300);
    s.api
      .take("/queue/status")
      .answer(ok({ ...waiting(0), status: "admitted", accessToken: "acc", accessExpiresAt: later(600) }));
    await elapse(0);
    expect(s.view.stages).toEqual(["start", "wait", "map"]);
    expect(s.view.places.map(([, p]) => p)).toEqual([0, 50, 100]);
    expect(s.seatMap.open).toHaveBeenCalledOnce();
    expect(s.store.saved?.accessToken).toBe("acc");
    // The revealed seed was checked against the commitment (WebCrypto answers on its own time).
    // Asked last: vi.waitFor advances the fake clock on every try, and asked before the polls it
    // let a loaded CI machine's first poll go out before 1.9 s had "passed".
    await vi.waitFor(() => expect(s.view.seed).toBe(true));
  });

  it("joins without a fan id and keeps the one the gateway issued; a kept id the line does not take is forgotten", async () => {
    const s = setup();
    s.model.resume();
    const first = s.model.begin();
    const asked = s.api.take("/queue");
    expect(asked.options.json).toEqual({});
    asked.answer(ok({ queueToken: "q1", fanId: "f.issued", position: 1, status: "waiting", ahead: 0 }, 201));
    await first;
    expect(s.store.fanId).toBe("f.issued");
    expect(s.store.saved?.fanId).toBe("f.issued");

    // Next visit: the kept id comes back with the join (the same place). On a line that takes
    // only ids it issued, an id it did not issue is refused: forgotten, and the fan joins anew.
    const again = setup();
    again.store.fanId = "typed-by-someone";
    again.model.resume();
    const second = again.model.begin();
    const named = again.api.take("/queue");
    expect(named.options.json).toEqual({ fanId: "typed-by-someone" });
    named.answer(
      refused(400, {
        code: "invalid_request",
        message: "this line takes only fan ids the gateway issued",
        details: { field: "fanId", reason: "not_issued" },
      }),
    );
    await elapse(0);
    const anew = again.api.take("/queue");
    expect(anew.options.json).toEqual({});
    anew.answer(ok({ queueToken: "q2", fanId: "f.fresh", position: 2, status: "waiting", ahead: 1 }, 201));
    await second;
    expect(again.store.fanId).toBe("f.fresh");
  });

  it("on a line that asks a proof of work, a fan with no id takes the challenge first and joins with the id it issued", async () => {
    const solver = vi.fn<PowSolver>(async () => "nonce-1");
    const s = setup(null, { info: { ...INFO, powBits: 12 }, invite: "inv", solver });
    s.model.resume();
    await elapse(0); // the room's info (powBits) is in
    const joining = s.model.begin();
    const challenge = s.api.take("/queue/challenge");
    // No fan id to name: the challenge issues one, bound to the proof.
    expect(challenge.path).toBe("/v1/events/evt/queue/challenge");
    challenge.answer(ok({ challenge: "c1", bits: 12, fanId: "f.from-challenge", expiresAt: later(60) }));
    await elapse(0);
    expect(solver).toHaveBeenCalledWith("c1", 12, expect.any(Function));
    const join = s.api.take("/queue");
    // One join, naming the challenge's id: the invite's person is held under an id this device knows.
    expect(join.options.json).toEqual({
      fanId: "f.from-challenge",
      invite: "inv",
      pow: { challenge: "c1", nonce: "nonce-1" },
    });
    join.answer(ok({ queueToken: "q1", fanId: "f.from-challenge", position: 1, status: "waiting", ahead: 0 }, 201));
    await joining;
    expect(s.store.fanId).toBe("f.from-challenge");
    expect(s.model.stage).toBe("wait");

    // A device that kept an id joins with it and no proof: a place it holds needs none.
    const back = setup(null, { info: { ...INFO, powBits: 12 }, solver });
    back.store.fanId = "f.kept";
    back.model.resume();
    await elapse(0);
    const again = back.model.begin();
    expect(back.api.count("/queue/challenge")).toBe(0);
    const rejoin = back.api.take("/queue");
    expect(rejoin.options.json).toEqual({ fanId: "f.kept" });
    rejoin.answer(ok({ queueToken: "q2", fanId: "f.kept", position: 4, status: "waiting", ahead: 3 }, 200));
    await again;
    expect(back.store.fanId).toBe("f.kept");
  });

  it("with an invite whose person holds a place under another id, joins without the kept id and keeps that place's", async () => {
    const s = setup(null, { invite: "inv" });
    s.store.fanId = "f.this-device";
    s.model.resume();
    const joining = s.model.begin();
    const named = s.api.take("/queue");
    expect(named.options.json).toEqual({ fanId: "f.this-device", invite: "inv" });
    named.answer(refused(409, { code: "identity_already_queued", message: "held" }));
    await elapse(0);
    const bare = s.api.take("/queue");
    expect(bare.options.json).toEqual({ invite: "inv" });
    bare.answer(ok({ queueToken: "q1", fanId: "f.persons-place", position: 2, status: "waiting", ahead: 1 }, 200));
    await joining;
    expect(s.store.fanId).toBe("f.persons-place");
    expect(s.model.stage).toBe("wait");

    // Without an invite the same refusal is final: the page says so and stays at the start.
    const plain = setup();
    plain.store.fanId = "f.kept";
    plain.model.resume();
    const refusedJoin = plain.model.begin();
    plain.api.take("/queue").answer(refused(409, { code: "identity_already_queued", message: "held" }));
    await refusedJoin;
    expect(plain.api.count("/queue")).toBe(1);
    expect(plain.model.stage).toBe("start");
  });

  it("polls exactly at pollAfterMs when the gateway schedules the poll on the fan's ETA, with no jitter", async () => {
    const s = setup();
    s.model.resume();
    const join = s.model.begin("fan-1");
    s.api
      .take("/queue")
      .answer(
        ok({ queueToken: "q1", position: 3, status: "waiting", ahead: 2, pollAfterSeconds: 2, pollAfterMs: 320 }, 201),
      );
    await join;
    await elapse(319);
    expect(s.api.count("/queue/status")).toBe(0);
    await elapse(1);
    s.api.take("/queue/status").answer(ok(waiting(0, { pollAfterMs: 120 })));
    await elapse(119);
    expect(s.api.count("/queue/status")).toBe(1); // the first poll only, so far
    await elapse(1);
    s.api
      .take("/queue/status")
      .answer(ok({ ...waiting(0), status: "admitted", accessToken: "acc", accessExpiresAt: later(600) }));
    await elapse(0);
    expect(s.view.stages.at(-1)).toBe("map");
  });

  it("a page that wakes (phone asleep, tab shown again) asks for its place at once, once", async () => {
    const s = setup();
    s.model.resume();
    const join = s.model.begin("fan-1");
    s.api
      .take("/queue")
      .answer(ok({ queueToken: "q1", position: 3, status: "waiting", ahead: 2, pollAfterSeconds: 30 }, 201));
    await join;
    // The phone sleeps: no timer runs. It wakes 90 s later, long after the poll was due.
    vi.setSystemTime(NOW + 90_000);
    s.model.wake();
    s.model.wake(); // a second signal (pageshow after visibilitychange) sends nothing more
    expect(s.api.count("/queue/status")).toBe(1);
    s.api.take("/queue/status").answer(ok(waiting(1, { pollAfterSeconds: 30 })));
    await elapse(0);
    expect(s.view.places.at(-1)).toEqual(["waiting", expect.any(Number)]);
    // Within a second of that poll a wake is ignored; the schedule the answer set stands.
    s.model.wake();
    expect(s.api.count("/queue/status")).toBe(1);
    await elapse(1_000);
    s.model.wake();
    expect(s.api.count("/queue/status")).toBe(2);
    s.api
      .take("/queue/status")
      .answer(ok({ ...waiting(0), status: "admitted", accessToken: "acc", accessExpiresAt: later(600) }));
    await elapse(0);
    expect(s.view.stages.at(-1)).toBe("map");
    // Once on the map, a wake asks nothing of the line.
    await elapse(2_000);
    s.model.wake();
    expect(s.api.count("/queue/status")).toBe(2);
  });

  it("an impossible move throws instead of leaving the page between stages", async () => {
    const s = setup({ fanId: "f", purchase: { purchaseId: "p", status: "confirmed", seats: [], amount: 0 } });
    s.model.resume();
    expect(s.view.stages).toEqual(["done"]);
    await expect(s.model.backToMap()).rejects.toThrow("cannot go from done to wait");
  });

  it("the session ending on the map closes it, forgets the picks and offers to rejoin", async () => {
    const s = setup({ fanId: "f", queueToken: "q", accessToken: "acc", accessExpiresAt: later(5) });
    s.model.resume();
    await elapse(0);
    expect(s.model.stage).toBe("map");
    s.api.setNow(NOW + 6_000);
    s.model.tick();
    expect(s.model.stage).toBe("wait");
    expect(s.seatMap.close).toHaveBeenCalledOnce();
    expect(s.seatMap.clearSelection).toHaveBeenCalledOnce();
    expect(s.store.saved?.accessToken).toBeUndefined();
    expect(s.view.lastMessage?.title).toBe("Your shopping session ran out.");
    expect(s.view.lastMessage?.actions?.[0]?.label).toBe("Join the line again");
  });
});

describe("the fan page's poll", () => {
  it("backs off on failures (2, 4, 8 s), honours Retry-After, and clears the notice once answered", async () => {
    const s = setup({ fanId: "f", queueToken: "q" });
    s.model.resume();
    const waits: number[] = [];
    for (const answer of [
      refused(503, { code: "unavailable", message: "x" }),
      noAnswer(),
      refused(500, { code: "internal", message: "x" }),
    ]) {
      s.api.take("/queue/status").answer(answer);
      await elapse(0);
      waits.push(Number(/again in (\d+) s/.exec(s.view.lastMessage?.text ?? "")?.[1]));
      await elapse(waits.at(-1)! * 1000 * 1.1);
    }
    expect(waits).toEqual([2, 4, 8]);
    s.api.take("/queue/status").answer(refused(429, { code: "rate_limited", message: "x" }, 7));
    await elapse(0);
    expect(s.view.lastMessage).toMatchObject({ title: "The line is very busy right now." });
    expect(s.view.lastMessage?.text).toContain("in 7 s");
    await elapse(7_700);
    s.api.take("/queue/status").answer(ok(waiting(4)));
    await elapse(0);
    expect(s.view.lastMessage).toBeNull();
    expect(s.model.stage).toBe("wait");
  });

  it("a refused queue token re-joins with the same fan id, three times in a row at most", async () => {
    const s = setup({ fanId: "same-fan", queueToken: "q" });
    s.model.resume();
    for (let i = 0; i < 3; i++) {
      s.api.take("/queue/status").answer(refused(401, { code: "unauthenticated", message: "x" }));
      await elapse(0);
      const join = s.api.take("/queue");
      expect(join.options.json).toEqual({ fanId: "same-fan" });
      join.answer(ok({ queueToken: `q${i}`, position: 1, status: "waiting", pollAfterSeconds: 1 }, 201));
      await elapse(1_200);
    }
    s.api.take("/queue/status").answer(refused(401, { code: "unauthenticated", message: "x" }));
    await elapse(0);
    expect(s.api.count("/queue") - s.api.count("/queue/status")).toBe(3);
    expect(s.view.lastMessage?.title).toBe("Reconnecting to the line…");
  });

  it("a place in a restarted line replaces the token, restarts the progress and says so", async () => {
    const s = setup({ fanId: "f", queueToken: "old", firstAhead: 40 });
    s.model.resume();
    s.api.take("/queue/status").answer(ok(waiting(0, { queueToken: "new", position: 1 })));
    await elapse(0);
    expect(s.store.saved).toMatchObject({ queueToken: "new", lineRestarted: true, firstAhead: 0 });
    expect(s.view.messages).toContainEqual(
      expect.objectContaining({ title: "The line had to be restarted after a technical problem." }),
    );
  });

  it("a join refused for good goes back to the start; a busy line is retried on the same stage", async () => {
    const s = setup();
    s.model.resume();
    const first = s.model.begin("f");
    s.api.take("/queue").answer(refused(503, { code: "unavailable", message: "x" }, 2));
    await first;
    expect(s.model.stage).toBe("start");
    await elapse(2_000);
    s.api.take("/queue").answer(ok({ queueToken: "q", position: 1, status: "waiting" }, 201));
    await elapse(0);
    expect(s.model.stage).toBe("wait");
    const again = s.model.rejoin();
    s.api.take("/queue").answer(refused(404, { code: "not_found", message: "x" }));
    await again;
    expect(s.model.stage).toBe("start");
    expect(s.view.lastMessage?.title).toBe('There is no on-sale called "evt".');
  });
});

describe("the fan page's checkout", () => {
  const shopping = (): FanSession => ({ fanId: "f", accessToken: "acc", accessExpiresAt: later(600) });

  async function inCheckout() {
    const s = setup(shopping());
    s.model.resume();
    await elapse(0);
    s.model.held(HOLD);
    return s;
  }

  it("repeats a payment's key only when the attempt got no answer", async () => {
    const s = await inCheckout();
    expect(s.model.stage).toBe("checkout");
    expect(s.seatMap.clearSelection).toHaveBeenCalled();
    const keys: string[] = [];
    const attempt = async (card: string, answer: Parameters<Call["answer"]>[0]) => {
      const paying = s.model.pay(card);
      expect(s.model.phase).toBe("paying");
      const call = s.api.take("/purchase");
      keys.push(call.options.headers?.["Idempotency-Key"] ?? "");
      call.answer(answer);
      await paying;
    };
    await attempt("tok_ok", noAnswer());
    await attempt("tok_ok", refused(402, { code: "payment_declined", message: "no" }));
    await attempt("tok_ok", refused(503, { code: "unavailable", message: "later" }));
    await attempt("tok_other", noAnswer());
    for (const key of keys) expect(key).toMatch(/^pay-[0-9a-f]{24}$/);
    expect(keys[1]).toBe(keys[0]); // no answer: the same attempt again
    expect(new Set([keys[1], keys[2], keys[3]]).size).toBe(3); // an answer, or another card: a new one
    expect(s.model.phase).toBe("form");
    expect(s.view.messages).toContainEqual(expect.objectContaining({ title: "Your card was declined." }));
  });

  it("a pending purchase is followed until it is confirmed, and only the receipt is kept", async () => {
    const s = await inCheckout();
    const paying = s.model.pay("tok_timeout");
    s.api.take("/purchase").answer(ok({ purchaseId: "p1", status: "pending" }, 202));
    await paying;
    expect(s.model.phase).toBe("pending");
    expect(s.store.saved?.purchase).toMatchObject({ purchaseId: "p1", status: "pending", seats: HOLD.seats });
    await elapse(1_000);
    s.api.take("/purchases/p1").answer(ok({ purchaseId: "p1", status: "pending" }));
    await elapse(1_500);
    s.api.take("/purchases/p1").answer(ok({ purchaseId: "p1", status: "confirmed", amount: 30000 }));
    await elapse(0);
    expect(s.model.stage).toBe("done");
    expect(s.store.saved).toEqual({
      fanId: "f",
      purchase: { purchaseId: "p1", status: "confirmed", seats: HOLD.seats, amount: 30000 },
    });
  });

  it("a reload while the bank is slow resumes the wait; a refund ends it as an expired hold", async () => {
    const s = setup({
      ...shopping(),
      hold: HOLD,
      purchase: { purchaseId: "p2", status: "pending", seats: [], amount: 0 },
    });
    s.model.resume();
    expect(s.view.stages).toEqual(["checkout"]);
    expect(s.model.phase).toBe("pending");
    await elapse(1_000);
    s.api.take("/purchases/p2").answer(ok({ purchaseId: "p2", status: "refunded" }));
    await elapse(0);
    expect(s.model.phase).toBe("expired");
    expect(s.view.lastMessage?.text).toBe("Your bank answered too late, so the charge was refunded in full.");
    expect(s.store.saved?.hold).toBeUndefined();
  });

  it("warns in the last minute and expires the hold when its time is up, then leads back to the map", async () => {
    const s = await inCheckout();
    s.api.setNow(NOW + 61_000);
    s.model.tick();
    expect(s.view.lastMessage?.title).toBe("Less than a minute left on your hold.");
    s.api.setNow(NOW + 121_000);
    s.model.tick();
    expect(s.model.phase).toBe("expired");
    const back = s.view.lastMessage?.actions?.[0];
    expect(back?.label).toBe("Back to the seat map");
    back?.run();
    await elapse(0);
    expect(s.model.stage).toBe("map");
    expect(s.view.stages).toEqual(["map", "checkout", "map"]);
  });

  it("releasing the seats deletes the hold and goes back to the map", async () => {
    const s = await inCheckout();
    const releasing = s.model.release();
    expect(s.model.phase).toBe("releasing");
    const call = s.api.take("/holds/h1");
    expect(call.method).toBe("DELETE");
    call.answer(ok(undefined, 204));
    await releasing;
    expect(s.model.stage).toBe("map");
    expect(s.store.saved?.hold).toBeUndefined();
  });
});
