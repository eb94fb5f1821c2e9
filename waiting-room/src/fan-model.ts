/**
 * The fan's page as a state machine, with no DOM. The page is in one stage at a time:
 *
 *   start ──join──▶ wait ──admitted──▶ map ──held──▶ checkout ──paid──▶ done ──restart──▶ start
 *   wait ◀──session ended── map, checkout;  checkout ──back, released, expired──▶ map;
 *   start ◀──join refused for good── wait
 *
 * (`NEXT` lists every move; `boot` is the moment before a reload resumes from storage). Inside
 * `checkout` the payment has its own phases (`CheckoutPhase`). The model polls the line, joins and
 * re-joins, pays and follows a pending purchase; the view (fan-view.ts) draws the stage it is told
 * and reads what it needs from here.
 */
import { Observed } from "./observed.js";
import type { Api, ApiErrorBody, ApiResult } from "./api.js";
import type { FanSession, StoredPurchase } from "./fan-session.js";
import { formatClock, type Message, message, randomHex } from "./format.js";
import type { Hold, Joined, PowSolver, Purchase, QueueStatus, SeatMapSummary, WaitingRoomInfo } from "./types.js";

export type Stage = "boot" | "start" | "wait" | "map" | "checkout" | "done";

/** Every move between stages the page makes; anything else is a bug and throws. */
export const NEXT: Record<Stage, readonly Stage[]> = {
  boot: ["start", "wait", "map", "checkout", "done"],
  // A hold answered after the session ended on screen still goes to checkout: the hold is the fan's.
  start: ["wait", "checkout"],
  wait: ["start", "map", "checkout"],
  map: ["wait", "checkout"],
  checkout: ["wait", "map", "done"],
  done: ["start"],
};

/**
 * form: ready to pay; paying: an attempt is out; releasing: the hold is being given back;
 * pending: the bank has not answered yet (the purchase settles on its own); expired: the hold ran out.
 */
export type CheckoutPhase = "form" | "paying" | "releasing" | "pending" | "expired";

export interface FanView {
  /** The page moved to `stage`; draw it from the model. */
  show(stage: Stage, focus: boolean): void;
  checkoutPhase(phase: CheckoutPhase): void;
  joining(busy: boolean): void;
  /** `progress`: percent of the line that was ahead (at its longest) gone through. */
  place(place: QueueStatus, progress: number): void;
  lottery(info: WaitingRoomInfo): void;
  /** The revealed seed against the commitment; null where WebCrypto is unavailable. */
  seedChecked(matches: boolean | null, lineRestarted: boolean): void;
  /** Seconds to the on-sale, null when it is not ahead. */
  countdown(secondsLeft: number | null, onSaleAt: number): void;
  sessionClock(secondsLeft: number): void;
  holdClock(secondsLeft: number): void;
  /** `inTitle`: the document's title too (once, at boot). */
  eventName(name: string, inTitle: boolean): void;
  message(m: Message): void;
  clearMessage(): void;
  /** After a declined card: the card choice is where the fan goes next. */
  focusPaymentChoice(): void;
}

/** The seat map as the fan's model sees it (seatmap.ts). */
export interface SeatMapPort {
  open(): Promise<void>;
  close(): void;
  clearSelection(): void;
  readonly eventName: string | undefined;
}

export interface SessionStore {
  load(): FanSession | null;
  save(session: FanSession): void;
  clear(): void;
  /** The fan id this device holds a place under in this event's line (the gateway issued it). */
  savedFanId?(): string | null;
  /** Keeps it for the next visit; null forgets it. */
  rememberFanId?(fanId: string | null): void;
}

export interface FanDeps {
  api: Pick<Api, "call" | "now">;
  eventId: string;
  store: SessionStore;
  seatMap: SeatMapPort;
  /** Solves the line's proof-of-work challenge (pow.ts: in a Web Worker); none: such a line refuses. */
  solver?: PowSolver;
  /** The operator's invite (`?invite=`), sent with every join. */
  invite?: string | undefined;
}

const SESSION_ENDED = "Your shopping session has ended.";
/** At most this many re-joins in a row when the line refuses the queue token. */
const MAX_REJOINS = 3;

export class FanModel extends Observed<FanView> {
  stage: Stage = "boot";
  phase: CheckoutPhase = "form";
  session: FanSession = { fanId: "" };
  info: WaitingRoomInfo | null = null;
  private infoLoadedAt = 0;
  private lastStatus: QueueStatus["status"] | null = null;
  private pollTimer: ReturnType<typeof setTimeout> | undefined;
  private pollFailures = 0;
  /** A status request is out (a wake does not send another). */
  private polling = false;
  private lastPollAt = 0;
  private rejoins = 0;
  private purchaseTimer: ReturnType<typeof setTimeout> | undefined;
  private warnedHoldEnding = false;

  constructor(private readonly deps: FanDeps) {
    super();
  }

  private go(next: Stage, focus = true) {
    if (!NEXT[this.stage].includes(next)) throw new Error(`the fan page cannot go from ${this.stage} to ${next}`);
    if (this.stage === "map") this.deps.seatMap.close();
    this.stage = next;
    this.view.show(next, focus);
  }

  private setPhase(phase: CheckoutPhase) {
    this.phase = phase;
    this.view.checkoutPhase(phase);
  }

  private save() {
    this.deps.store.save(this.session);
  }

  private path(rest: string): string {
    return `/v1/events/${encodeURIComponent(this.deps.eventId)}${rest}`;
  }

  /** Seconds left of the access token's session; unbounded when it carries no expiry. */
  sessionSecondsLeft(): number {
    if (!this.session.accessExpiresAt) return Number.POSITIVE_INFINITY;
    return (Date.parse(this.session.accessExpiresAt) - this.deps.api.now()) / 1000;
  }

  holdSecondsLeft(): number {
    return this.session.hold ? (Date.parse(this.session.hold.expiresAt) - this.deps.api.now()) / 1000 : 0;
  }

  // --- boot ----------------------------------------------------------------------------------

  /** Picks up where this tab was, from what the store kept. */
  resume(): void {
    const saved = this.deps.store.load();
    if (!saved) {
      this.go("start", false);
      void this.loadInfo();
      return;
    }
    this.session = saved;
    const { purchase, hold } = saved;
    if (purchase?.status === "confirmed") {
      this.go("done", false);
    } else if (purchase?.status === "pending" && hold) {
      this.phase = "form";
      this.go("checkout", false);
      this.awaitPayment(purchase.purchaseId);
    } else if (hold && this.holdSecondsLeft() > 0 && saved.accessToken) {
      this.phase = "form";
      this.go("checkout", false);
    } else if (saved.accessToken && this.sessionSecondsLeft() > 0) {
      void this.enterMap();
    } else if (saved.queueToken) {
      this.go("wait", false);
      void this.loadInfo();
      void this.poll();
    } else {
      this.go("start", false);
      void this.loadInfo();
    }
  }

  /** The event's name, for the page header before the seat map is open. */
  async loadEventName(): Promise<void> {
    const res = await this.deps.api.call<SeatMapSummary>("GET", this.path("/seatmap"));
    if (res.ok && res.body.name) this.view.eventName(res.body.name, true);
  }

  /** Once a second: the clock of whatever the stage counts down to. */
  tick(): void {
    if (this.stage === "wait") this.countdown();
    if (this.stage === "map") this.tickSession();
    if (this.stage === "checkout") this.tickHold();
  }

  /** Back to the start after a purchase: only the fan id stays. */
  restart(): void {
    this.deps.store.clear();
    this.session = { fanId: this.session.fanId };
    this.go("start");
  }

  // --- the line --------------------------------------------------------------------------------

  /**
   * The fan pressed "Join the line". The page asks for nothing: a fan id this device was given
   * for this event before (its place, if it still holds one), else none, and the gateway issues
   * one (docs/waiting-room.md "Whose place").
   */
  begin(fanId?: string): Promise<void> {
    this.session = { fanId: fanId ?? this.deps.store.savedFanId?.() ?? "" };
    this.save();
    return this.join();
  }

  private joinBody(pow?: { challenge: string; nonce: string }) {
    return {
      ...(this.session.fanId ? { fanId: this.session.fanId } : {}),
      ...(this.deps.invite ? { invite: this.deps.invite } : {}),
      ...(pow ? { pow } : {}),
    };
  }

  async join(): Promise<void> {
    this.view.joining(true);
    // A fan with no id yet on a line that asks a proof of work: the challenge comes first and
    // issues the id the proof is bound to, so the join names it (an invite's person is then held
    // under an id this device knows, not one issued to a join the line refused for want of a proof).
    const first = !this.session.fanId && (this.info?.powBits ?? 0) > 0 ? await this.solveChallenge() : null;
    let res = await this.deps.api.call<Joined>("POST", this.path("/queue"), {
      json: this.joinBody(first ?? undefined),
    });
    // A kept fan id the line does not take (an event that takes only ids it issued, and this one
    // it did not), or, with an invite, not the id its person holds a place under: forgotten, and
    // the fan joins without one (with an invite, the gateway answers with the person's place).
    if (!res.ok && this.session.fanId && (notIssued(res.error) || this.otherHoldsInvite(res.error))) {
      this.forgetFanId();
      res = await this.deps.api.call<Joined>("POST", this.path("/queue"), { json: this.joinBody() });
    }
    // The line asks a proof of work for a new place: solve a challenge, then join with it. Once
    // more if the cost was raised meanwhile.
    for (let tries = 0; !res.ok && res.error.code === "proof_of_work_required" && tries < 2; tries++) {
      // The id the gateway chose for this join (an invite's person is held under it): the proof
      // must be bound to that one.
      const chosen = res.error.details?.fanId;
      if (typeof chosen === "string" && chosen !== this.session.fanId) this.keepFanId(chosen);
      const pow = await this.solveChallenge();
      if (!pow) break;
      res = await this.deps.api.call<Joined>("POST", this.path("/queue"), { json: this.joinBody(pow) });
    }
    this.view.joining(false);
    if (!res.ok) return this.joinRefused(res.error, res.retryAfter);
    this.view.clearMessage();
    if (res.body.fanId) this.keepFanId(res.body.fanId);
    this.session.queueToken = res.body.queueToken;
    this.session.commitment ??= res.body.lottery?.commitment;
    this.lastStatus = res.body.status;
    this.save();
    if (this.stage !== "wait") this.go("wait");
    await this.loadInfo();
    this.showPlace({
      status: res.body.status,
      position: res.body.position,
      provisional: res.body.provisional ?? res.body.status === "prequeue",
      ahead: res.body.ahead ?? 0,
      etaSeconds: res.body.etaSeconds ?? null,
      pollAfterSeconds: res.body.pollAfterSeconds ?? 2,
    });
    this.schedulePoll(res.body.status === "admitted" ? 0 : (res.body.pollAfterSeconds ?? 2), res.body.pollAfterMs);
  }

  private otherHoldsInvite(error: ApiErrorBody): boolean {
    return error.code === "identity_already_queued" && this.deps.invite !== undefined;
  }

  private keepFanId(fanId: string) {
    this.session.fanId = fanId;
    this.deps.store.rememberFanId?.(fanId);
  }

  private forgetFanId() {
    this.session.fanId = "";
    this.deps.store.rememberFanId?.(null);
  }

  /**
   * Fetches a challenge for this fan and solves it, showing progress; null when it cannot. A fan
   * with no id yet is given one with the challenge (the proof is bound to it).
   */
  private async solveChallenge(): Promise<{ challenge: string; nonce: string } | null> {
    const { solver } = this.deps;
    const query = this.session.fanId ? `?fanId=${encodeURIComponent(this.session.fanId)}` : "";
    const issued = await this.deps.api.call<{ challenge: string; bits: number; fanId?: string }>(
      "GET",
      this.path(`/queue/challenge${query}`),
    );
    if (!issued.ok || !solver) return null;
    if (issued.body.fanId && issued.body.fanId !== this.session.fanId) this.keepFanId(issued.body.fanId);
    const { challenge, bits } = issued.body;
    const checking = (share: number) =>
      this.view.message(
        message(
          "info",
          "Checking your browser before you join…",
          `This keeps bots out of the line. ${Math.min(99, Math.floor(share * 100))}% done.`,
        ),
      );
    checking(0);
    try {
      const nonce = await solver(challenge, bits, checking);
      return { challenge, nonce };
    } catch {
      return null;
    }
  }

  private joinRefused({ code, message: reason }: ApiErrorBody, retryAfter: number | null) {
    const final: Record<string, Message> = {
      not_found: message(
        "error",
        `There is no on-sale called "${this.deps.eventId}".`,
        "Check the link you were given.",
      ),
      forbidden: message("error", "You can't join this line.", reason),
      invalid_request: message("error", "The line didn't accept this page's request to join.", reason),
      proof_of_work_required: message("error", "Your browser couldn't complete the check to join.", reason),
      invalid_proof: message("error", "Your browser's check to join was refused.", "Reload the page to try again."),
      invite_required: message("error", "This line is open to invited fans only.", "Use the link in your invitation."),
      invalid_invite: message("error", "Your invitation wasn't accepted.", reason),
      identity_already_queued: message(
        "error",
        "Your invitation is already in the line.",
        "It holds one place: continue on the device you joined with.",
      ),
    };
    const refusal = final[code];
    if (refusal) {
      this.view.message(refusal);
      if (this.stage !== "start") this.go("start");
      return;
    }
    const wait = retryAfter ?? 3;
    this.view.message(
      code === "rate_limited"
        ? message("warning", "The line is very busy right now.", `We'll try again in ${wait} s.`)
        : // 503 (the line is unavailable for a moment) or no answer at all.
          message("info", "Reconnecting to the line…", `We'll try again in ${wait} s. Keep this tab open.`),
    );
    // A retry keeps the stage the fan is on (the waiting room stays on screen while reconnecting).
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(() => void this.join(), wait * 1000);
  }

  /** Joins again from the back: the old place was released or the session ended. */
  async rejoin(): Promise<void> {
    this.session = { fanId: this.session.fanId };
    this.save();
    await this.join();
  }

  private schedulePoll(seconds: number, scheduledMs?: number) {
    clearTimeout(this.pollTimer);
    // Scheduled on our ETA (`pollAfterMs`): poll then, so we know of our turn as it comes. Else
    // never sooner than asked and a little later at random, so a crowd told the same interval
    // does not arrive in the same millisecond.
    if (scheduledMs !== undefined && Number.isFinite(scheduledMs) && scheduledMs >= 0) {
      this.pollTimer = setTimeout(() => void this.poll(), scheduledMs);
      return;
    }
    const ms = Math.max(0, seconds) * 1000;
    this.pollTimer = setTimeout(() => void this.poll(), ms + Math.random() * Math.min(2_000, ms / 10));
  }

  /**
   * The page came back (a phone woke, the tab was shown again, the network returned): timers did
   * not run while it slept, so the place is asked for at once instead of at a schedule that passed
   * long ago. Within the abandonment window the place is still the fan's; after it, the poll says
   * `abandoned` and the page offers to join again. At most one such poll a second.
   */
  wake(): void {
    if (this.stage !== "wait" || !this.session.queueToken || this.polling) return;
    if (Date.now() - this.lastPollAt < 1_000) return;
    clearTimeout(this.pollTimer);
    void this.poll();
  }

  async poll(): Promise<void> {
    if (!this.session.queueToken) return;
    this.polling = true;
    this.lastPollAt = Date.now();
    const res = await this.deps.api.call<QueueStatus>("GET", this.path("/queue/status"), {
      token: this.session.queueToken,
    });
    this.polling = false;
    if (res.ok) await this.placeKnown(res.body);
    else await this.pollRefused(res);
  }

  private async pollRefused(res: Extract<ApiResult<QueueStatus>, { ok: false }>) {
    if ((res.status === 401 || res.status === 404) && this.rejoins < MAX_REJOINS) {
      // The token was refused or the line lost track of us: joining again with the same fan id
      // gives back the same place while we are still in line.
      this.rejoins++;
      await this.join();
      return;
    }
    if (res.error.code === "forbidden") {
      this.view.message(message("error", "You can no longer take part in this on-sale.", res.error.message));
      return;
    }
    this.pollFailures++;
    const wait = res.retryAfter ?? Math.min(30, 2 ** Math.min(this.pollFailures, 5));
    this.view.message(
      message(
        "info",
        res.error.code === "rate_limited" ? "The line is very busy right now." : "Reconnecting to the line…",
        `Your place is kept; we'll check again in ${wait} s. Keep this tab open.`,
      ),
    );
    this.schedulePoll(wait);
  }

  private async placeKnown(place: QueueStatus) {
    if (this.pollFailures > 0) this.view.clearMessage();
    this.pollFailures = 0;
    this.rejoins = 0;
    if (place.queueToken) this.lineRestarted(place.queueToken, place.position);
    this.showPlace(place);
    // The seed is revealed at the draw: look for it as soon as we leave the pre-queue, and after the
    // on-sale at most every 15 s until it shows.
    const justDrawn = this.lastStatus === "prequeue" && place.status !== "prequeue";
    const drawDue = place.status !== "prequeue" || this.deps.api.now() >= Date.parse(this.info?.onSaleAt ?? "");
    if (!this.info?.lottery.seed && (justDrawn || (drawDue && Date.now() - this.infoLoadedAt > 15_000))) {
      void this.loadInfo();
    }
    this.lastStatus = place.status;
    await this.follow(place);
  }

  /** The line was lost (a failure on our side) and this poll gave us a place in the new one. */
  private lineRestarted(queueToken: string, position: number) {
    this.session.queueToken = queueToken;
    this.session.firstAhead = undefined;
    this.session.lineRestarted = true;
    this.save();
    // The new line has its own lottery commitment (the old seed was lost with it).
    void this.loadInfo();
    this.view.message(
      message(
        "warning",
        "The line had to be restarted after a technical problem.",
        `You have a new place: #${position.toLocaleString()}. Keep this tab open.`,
      ),
    );
  }

  /** What a place in line means next: the seat map, another poll, or the end of the road. */
  private async follow(place: QueueStatus) {
    switch (place.status) {
      case "admitted":
        if (!place.accessToken) return this.schedulePoll(1);
        this.session.accessToken = place.accessToken;
        if (place.accessExpiresAt) this.session.accessExpiresAt = place.accessExpiresAt;
        this.save();
        return this.enterMap();
      case "abandoned":
      case "expired":
      case "completed": {
        const why = {
          abandoned: "This tab stopped checking in for a while, so your place was released.",
          expired: "Your shopping session ran out.",
          completed: "You've already bought tickets in this session.",
        }[place.status];
        return this.view.message(
          message("warning", why, "You can join the line again; you'll go to the back.", [
            { label: "Join the line again", run: () => void this.rejoin() },
          ]),
        );
      }
      case "revoked":
        return this.view.message(
          message("error", "The organiser ended your session.", "You can't rejoin this on-sale."),
        );
      default:
        return this.schedulePoll(place.pollAfterSeconds, place.pollAfterMs);
    }
  }

  private showPlace(place: QueueStatus) {
    // Progress: how much of the line that was ahead of us (at its longest) has gone through.
    if (place.status === "waiting") {
      this.session.firstAhead = Math.max(this.session.firstAhead ?? 0, place.ahead);
      this.save();
    }
    const first = this.session.firstAhead ?? 0;
    const share =
      place.status === "admitted"
        ? 1
        : place.status === "waiting"
          ? first === 0
            ? 1
            : (first - place.ahead) / first
          : 0;
    this.view.place(place, Math.round(Math.max(0, Math.min(1, share)) * 100));
  }

  async loadInfo(): Promise<void> {
    const res = await this.deps.api.call<WaitingRoomInfo>("GET", this.path("/waiting-room"));
    if (!res.ok) return;
    this.info = res.body;
    this.infoLoadedAt = Date.now();
    // The first commitment seen is the one kept (a gateway older than the join's commitment).
    if (this.session.queueToken && this.session.commitment === undefined) {
      this.session.commitment = res.body.lottery.commitment;
      this.save();
    }
    this.view.lottery(res.body);
    this.startClosed(res.body.state === "closed");
    const seed = res.body.lottery.seed;
    if (seed) void this.checkSeed(seed, this.session.commitment ?? res.body.lottery.commitment);
    this.countdown();
  }

  /**
   * A closed line gives no new place: the start says so before the fan presses Join, not after a
   * refused join. A browser that joined before keeps its button (a place it holds is given back).
   */
  private startClosed(closed: boolean) {
    if (this.stage !== "start" || !closed) return;
    const returning = Boolean(this.session.fanId || this.deps.store.savedFanId?.());
    if (!returning) this.view.joining(true);
    this.view.message(
      message(
        "warning",
        "This line is closed.",
        returning
          ? "The on-sale was closed: no new places are given. Join again to get back a place this browser still holds."
          : "The on-sale was closed or has ended: no new places are given.",
      ),
    );
  }

  /** Recomputes SHA-256(seed) where WebCrypto is available (https or localhost). */
  private async checkSeed(seed: string, commitment: string) {
    if (!globalThis.crypto?.subtle) {
      this.view.seedChecked(null, this.session.lineRestarted === true);
      return;
    }
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(seed));
    const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
    this.view.seedChecked(hex === commitment.toLowerCase(), this.session.lineRestarted === true);
  }

  private countdown() {
    const onSale = this.info ? Date.parse(this.info.onSaleAt) : Number.NaN;
    const left = (onSale - this.deps.api.now()) / 1000;
    this.view.countdown(Number.isFinite(left) && left > 0 ? left : null, onSale);
  }

  // --- the seat map ------------------------------------------------------------------------------

  async enterMap(): Promise<void> {
    clearTimeout(this.pollTimer);
    if (!this.session.accessToken || this.sessionSecondsLeft() <= 0) {
      this.sessionEnded(SESSION_ENDED);
      return;
    }
    this.view.clearMessage();
    this.go("map");
    this.tickSession();
    await this.deps.seatMap.open();
    const name = this.deps.seatMap.eventName;
    if (name) this.view.eventName(name, false);
  }

  private tickSession() {
    const left = this.sessionSecondsLeft();
    this.view.sessionClock(left);
    if (left <= 0 && this.stage === "map") this.sessionEnded("Your shopping session ran out.");
  }

  /** The access token is gone or refused: back to the line's page, with a way to rejoin. */
  sessionEnded(reason: string): void {
    this.deps.seatMap.clearSelection();
    this.session.accessToken = undefined;
    this.session.accessExpiresAt = undefined;
    this.save();
    if (this.stage !== "start" && this.stage !== "wait") this.go("wait");
    this.view.message(
      message("warning", reason, "Join the line again to keep shopping; you'll go to the back.", [
        { label: "Join the line again", run: () => void this.rejoin() },
      ]),
    );
  }

  // --- checkout ----------------------------------------------------------------------------------

  /** The seat map got a hold. */
  held(hold: Hold): void {
    this.session.hold = { ...hold };
    this.session.payment = undefined;
    this.warnedHoldEnding = false;
    this.save();
    this.deps.seatMap.clearSelection();
    this.view.clearMessage();
    this.phase = "form";
    this.go("checkout");
    this.tickHold();
  }

  private tickHold() {
    if (this.stage !== "checkout" || !this.session.hold) return;
    const left = this.holdSecondsLeft();
    this.view.holdClock(left);
    const paying = this.phase === "paying";
    if (left <= 60 && left > 0 && !this.warnedHoldEnding && !paying) {
      this.warnedHoldEnding = true;
      this.view.message(message("info", "Less than a minute left on your hold.", "Pay now to keep your seats."));
    }
    if (left <= 0 && !paying && this.phase !== "pending") this.holdExpired(false);
  }

  private holdExpired(refunded: boolean) {
    this.session.hold = undefined;
    this.session.payment = undefined;
    this.save();
    this.setPhase("expired");
    this.view.message(
      message(
        "warning",
        "Your hold has expired and the seats were released.",
        refunded ? "Your bank answered too late, so the charge was refunded in full." : "You can pick seats again.",
        [{ label: "Back to the seat map", run: () => void this.backToMap() }],
      ),
    );
  }

  async backToMap(): Promise<void> {
    clearTimeout(this.purchaseTimer);
    this.session.hold = undefined;
    this.session.payment = undefined;
    this.save();
    await this.enterMap();
  }

  async pay(paymentToken: string): Promise<void> {
    const hold = this.session.hold;
    const token = this.session.accessToken;
    if (!hold || this.phase === "paying") return;
    if (!token) return this.sessionEnded(SESSION_ENDED);
    // The same key only to repeat an attempt whose answer never arrived; anything else is a new attempt.
    let attempt = this.session.payment;
    if (!attempt || attempt.settled || attempt.holdId !== hold.holdId || attempt.paymentToken !== paymentToken) {
      attempt = { key: `pay-${randomHex(12)}`, holdId: hold.holdId, paymentToken, settled: false };
    }
    this.session.payment = attempt;
    this.save();
    this.view.clearMessage();
    this.setPhase("paying");
    const res = await this.deps.api.call<Purchase>(
      "POST",
      this.path(`/holds/${encodeURIComponent(hold.holdId)}/purchase`),
      { token, headers: { "Idempotency-Key": attempt.key }, json: { paymentToken }, timeoutMs: 60_000 },
    );
    this.setPhase("form");
    if (!res.ok && res.status === 0) {
      this.view.message(
        message(
          "warning",
          "We didn't hear back about your payment.",
          "Press Pay again: it is safe, you will not be charged twice.",
        ),
      );
      return;
    }
    attempt.settled = true;
    this.save();
    if (!res.ok) return this.payRefused(res.error);
    if (res.body.status === "confirmed") return this.confirmed(res.body);
    this.awaitPayment(res.body.purchaseId);
  }

  private payRefused({ code, message: reason, details }: ApiErrorBody) {
    switch (code) {
      case "payment_declined":
        this.view.message(
          message(
            "error",
            "Your card was declined.",
            `Nothing was charged. Your seats stay held for ${formatClock(this.holdSecondsLeft())}: try another card.`,
          ),
        );
        return this.view.focusPaymentChoice();
      case "hold_expired":
      case "not_found":
        return this.holdExpired(details?.refunded === true);
      case "unauthenticated":
        return this.sessionEnded(SESSION_ENDED);
      case "unavailable":
        return this.view.message(
          message(
            "warning",
            "The payment provider had a problem.",
            "Nothing was charged. Please try again in a moment.",
          ),
        );
      default:
        return this.view.message(message("error", "The payment didn't go through.", reason));
    }
  }

  /** 202: the bank has not answered yet. The purchase settles on its own; we keep asking. */
  private awaitPayment(purchaseId: string) {
    const hold = this.session.hold;
    this.session.purchase = { purchaseId, status: "pending", seats: hold?.seats ?? [], amount: hold?.amount ?? 0 };
    if (hold?.generalAdmission) this.session.purchase.generalAdmission = hold.generalAdmission;
    this.save();
    this.setPhase("pending");
    this.purchaseTimer = setTimeout(() => void this.checkPurchase(purchaseId, 1), 1000);
  }

  private async checkPurchase(purchaseId: string, attempts: number) {
    const res = await this.deps.api.call<Purchase>("GET", `/v1/purchases/${encodeURIComponent(purchaseId)}`, {
      token: this.session.accessToken,
    });
    const again = () => {
      const next = Math.min(5, 1 + attempts * 0.5);
      this.purchaseTimer = setTimeout(() => void this.checkPurchase(purchaseId, attempts + 1), next * 1000);
    };
    if (!res.ok) return again();
    switch (res.body.status) {
      case "confirmed":
        return this.confirmed(res.body);
      case "refunded":
        this.session.purchase = undefined;
        return this.holdExpired(true);
      case "failed":
        this.session.purchase = undefined;
        this.save();
        this.setPhase("form");
        return this.view.message(
          message(
            "error",
            "Your bank turned the payment down.",
            "Nothing was charged. You can try another card while the seats are held.",
          ),
        );
      default:
        return again();
    }
  }

  private confirmed(purchase: Purchase) {
    clearTimeout(this.purchaseTimer);
    const hold = this.session.hold;
    const stored: StoredPurchase = {
      purchaseId: purchase.purchaseId,
      status: "confirmed",
      seats: purchase.seats ?? hold?.seats ?? [],
      amount: purchase.amount ?? hold?.amount ?? 0,
    };
    const area = purchase.generalAdmission ?? hold?.generalAdmission;
    if (area) stored.generalAdmission = area;
    // The purchase ends the shopping session: only the receipt is worth keeping.
    this.session = { fanId: this.session.fanId, purchase: stored };
    this.save();
    this.view.clearMessage();
    this.go("done");
  }

  async release(): Promise<void> {
    const hold = this.session.hold;
    if (!hold) return this.backToMap();
    this.setPhase("releasing");
    await this.deps.api.call("DELETE", this.path(`/holds/${encodeURIComponent(hold.holdId)}`), {
      token: this.session.accessToken,
    });
    this.view.message(message("info", "Your seats were released.", "Pick again whenever you're ready."));
    await this.backToMap();
  }
}

/** A refusal of a fan id the gateway did not issue (docs/API.md "Whose place"). */
function notIssued(error: ApiErrorBody): boolean {
  return error.code === "invalid_request" && error.details?.reason === "not_issued";
}
