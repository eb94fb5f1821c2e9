/**
 * The fan's page: join the line, wait (position, people ahead, ETA, progress, the on-sale
 * countdown and the lottery commitment / revealed seed), then the seat map, the checkout with a
 * test card, and the confirmation. One page, one view at a time; everything needed to pick up
 * where the fan was after a reload is in sessionStorage.
 */
import { Api } from "./api.js";
import { apiBase, apiIsElsewhere, DEFAULT_EVENT_ID, eventIdFromUrl, isEventId } from "./config.js";
import { byId, clearFlash, flash, h, setText } from "./dom.js";
import { formatClock, formatEta, formatMoney, plural, randomHex } from "./format.js";
import { SeatMap } from "./seatmap.js";
import {
  clearSession,
  type FanSession,
  loadSession,
  rememberFanId,
  savedFanId,
  saveSession,
  type StoredHold,
  type StoredPurchase,
} from "./storage.js";
import type { Hold, Joined, Purchase, QueueStatus, SeatMapSummary, WaitingRoomInfo } from "./types.js";

type View = "start" | "wait" | "map" | "checkout" | "done";
const FLASH = "flash";

const api = new Api(apiBase());
const eventId = eventIdFromUrl() ?? DEFAULT_EVENT_ID;
let session: FanSession = { fanId: "" };
let view: View = "start";
let info: WaitingRoomInfo | null = null;
let infoLoadedAt = 0;
let lastStatus: QueueStatus["status"] | null = null;
let pollTimer: ReturnType<typeof setTimeout> | undefined;
let pollFailures = 0;
let rejoins = 0;
let purchaseTimer: ReturnType<typeof setTimeout> | undefined;
let paying = false;
let warnedHoldEnding = false;

const seatMap = new SeatMap({
  api,
  eventId,
  flashRegion: FLASH,
  accessToken: () => session.accessToken,
  onHeld: (hold) => enterCheckout(hold),
  onSessionEnded: (reason) => sessionEnded(reason),
});

function save() {
  saveSession(eventId, session);
}

function show(next: View, focus = true) {
  for (const name of ["start", "wait", "map", "checkout", "done"] as const) byId(`view-${name}`).hidden = name !== next;
  if (view === "map" && next !== "map") seatMap.close();
  view = next;
  document.body.dataset.view = next;
  if (focus) byId(`${next}-title`).focus();
}

function newFanId(): string {
  return `fan-${randomHex(5)}`;
}

// --- start -----------------------------------------------------------------------------------

function initStart() {
  const eventInput = byId<HTMLInputElement>("start-event");
  const fanInput = byId<HTMLInputElement>("start-fan");
  eventInput.value = eventId;
  fanInput.value = savedFanId() ?? newFanId();
  byId("start-new-id").addEventListener("click", () => {
    fanInput.value = newFanId();
    fanInput.focus();
  });
  byId<HTMLFormElement>("start-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const chosenEvent = eventInput.value.trim();
    const fanId = fanInput.value.trim();
    if (!isEventId(chosenEvent)) {
      flash(FLASH, "warning", "That event id doesn't look right.", "Use letters, digits and _ (up to 32).");
      eventInput.focus();
      return;
    }
    if (fanId.length < 1 || fanId.length > 128 || /[^\x20-\x7E]/.test(fanId)) {
      flash(FLASH, "warning", "Your fan id needs 1 to 128 plain characters.");
      fanInput.focus();
      return;
    }
    if (chosenEvent !== eventId) {
      // Another event: reload with it in the address, so the link can be shared and bookmarked.
      const url = new URL(location.href);
      url.searchParams.set("event", chosenEvent);
      rememberFanId(fanId);
      location.assign(url.toString());
      return;
    }
    rememberFanId(fanId);
    session = { fanId };
    save();
    void join();
  });
}

// --- waiting room ----------------------------------------------------------------------------

async function join(): Promise<void> {
  const button = byId<HTMLButtonElement>("start-join");
  button.disabled = true;
  const res = await api.call<Joined>("POST", `/v1/events/${encodeURIComponent(eventId)}/queue`, {
    json: { fanId: session.fanId },
  });
  button.disabled = false;
  if (!res.ok) {
    const { code, message } = res.error;
    if (code === "not_found")
      flash(FLASH, "error", `There is no on-sale called "${eventId}".`, "Check the link you were given.");
    else if (code === "forbidden") flash(FLASH, "error", "You can't join this line.", message);
    else if (code === "invalid_request") flash(FLASH, "warning", "That fan id can't be used.", message);
    else {
      const wait = res.retryAfter ?? 3;
      if (res.error.code === "rate_limited") {
        flash(FLASH, "warning", "The line is very busy right now.", `We'll try again in ${wait} s.`);
      } else {
        // 503 (the line is unavailable for a moment) or no answer at all.
        flash(FLASH, "info", "Reconnecting to the line…", `We'll try again in ${wait} s. Keep this tab open.`);
      }
      clearTimeout(pollTimer);
      pollTimer = setTimeout(() => void join(), wait * 1000);
      // A retry keeps the view the fan is on (the waiting room stays on screen while reconnecting).
      return;
    }
    if (view !== "start") show("start");
    return;
  }
  clearFlash(FLASH);
  session.queueToken = res.body.queueToken;
  lastStatus = res.body.status;
  save();
  if (view !== "wait") show("wait");
  await loadInfo();
  renderPlace({
    status: res.body.status,
    position: res.body.position,
    provisional: res.body.provisional ?? res.body.status === "prequeue",
    ahead: res.body.ahead ?? 0,
    etaSeconds: res.body.etaSeconds ?? null,
    pollAfterSeconds: res.body.pollAfterSeconds ?? 2,
  });
  schedulePoll(res.body.status === "admitted" ? 0 : (res.body.pollAfterSeconds ?? 2));
}

function schedulePoll(seconds: number) {
  clearTimeout(pollTimer);
  // Never sooner than asked; a little later at random, so a crowd told the same interval (everyone
  // in the pre-queue at the on-sale) does not arrive in the same millisecond.
  const ms = Math.max(0, seconds) * 1000;
  pollTimer = setTimeout(() => void poll(), ms + Math.random() * Math.min(2_000, ms / 10));
}

async function poll(): Promise<void> {
  if (!session.queueToken) return;
  const res = await api.call<QueueStatus>("GET", `/v1/events/${encodeURIComponent(eventId)}/queue/status`, {
    token: session.queueToken,
  });
  if (!res.ok) {
    if ((res.status === 401 || res.status === 404) && rejoins < 3) {
      // The token was refused or the line lost track of us: joining again with the same fan id
      // gives back the same place while we are still in line.
      rejoins++;
      await join();
      return;
    }
    if (res.error.code === "forbidden") {
      flash(FLASH, "error", "You can no longer take part in this on-sale.", res.error.message);
      return;
    }
    pollFailures++;
    const wait = res.retryAfter ?? Math.min(30, 2 ** Math.min(pollFailures, 5));
    flash(
      FLASH,
      "info",
      res.error.code === "rate_limited" ? "The line is very busy right now." : "Reconnecting to the line…",
      `Your place is kept; we'll check again in ${wait} s. Keep this tab open.`,
    );
    schedulePoll(wait);
    return;
  }
  if (pollFailures > 0) clearFlash(FLASH);
  pollFailures = 0;
  rejoins = 0;
  const place = res.body;
  if (place.queueToken) {
    // The line was lost (a failure on our side) and this poll gave us a place in the new one.
    session.queueToken = place.queueToken;
    session.firstAhead = undefined;
    session.lineRestarted = true;
    save();
    // The new line has its own lottery commitment (the old seed was lost with it).
    void loadInfo();
    flash(
      FLASH,
      "warning",
      "The line had to be restarted after a technical problem.",
      `You have a new place: #${place.position.toLocaleString()}. Keep this tab open.`,
    );
  }
  renderPlace(place);
  // The seed is revealed at the draw: look for it as soon as we leave the pre-queue, and after the
  // on-sale at most every 15 s until it shows.
  const justDrawn = lastStatus === "prequeue" && place.status !== "prequeue";
  const drawDue = place.status !== "prequeue" || api.now() >= Date.parse(info?.onSaleAt ?? "");
  if (!info?.lottery.seed && (justDrawn || (drawDue && Date.now() - infoLoadedAt > 15_000))) void loadInfo();
  lastStatus = place.status;
  switch (place.status) {
    case "admitted":
      if (place.accessToken) {
        session.accessToken = place.accessToken;
        if (place.accessExpiresAt) session.accessExpiresAt = place.accessExpiresAt;
        save();
        await enterMap();
        return;
      }
      schedulePoll(1);
      return;
    case "abandoned":
    case "expired":
    case "completed": {
      const why =
        place.status === "abandoned"
          ? "This tab stopped checking in for a while, so your place was released."
          : place.status === "expired"
            ? "Your shopping session ran out."
            : "You've already bought tickets in this session.";
      flash(FLASH, "warning", why, "You can join the line again; you'll go to the back.", [
        { label: "Join the line again", run: () => void rejoin() },
      ]);
      return;
    }
    case "revoked":
      flash(FLASH, "error", "The organiser ended your session.", "You can't rejoin this on-sale.");
      return;
    default:
      schedulePoll(place.pollAfterSeconds);
  }
}

async function rejoin() {
  session = { fanId: session.fanId };
  save();
  await join();
}

async function loadInfo(): Promise<void> {
  const res = await api.call<WaitingRoomInfo>("GET", `/v1/events/${encodeURIComponent(eventId)}/waiting-room`);
  if (!res.ok) return;
  info = res.body;
  infoLoadedAt = Date.now();
  renderLottery();
  tickCountdown();
}

function renderPlace(place: QueueStatus) {
  const labels: Record<string, string> = {
    prequeue: "In the pre-queue",
    waiting: "In line",
    admitted: "It's your turn!",
    abandoned: "Place released",
    expired: "Session ended",
    completed: "Done",
    revoked: "Session ended by the organiser",
  };
  setText("wait-status", labels[place.status] ?? place.status);
  byId("wait-panel").dataset.status = place.status;
  if (place.status === "prequeue") {
    setText("wait-position", `#${place.position.toLocaleString()} to arrive`);
    setText(
      "wait-position-note",
      "Places are drawn at random when the sale opens: arriving early doesn't put you ahead.",
    );
  } else {
    setText("wait-position", `#${place.position.toLocaleString()}`);
    setText("wait-position-note", "");
  }
  setText("wait-ahead", place.status === "admitted" ? "0" : place.ahead.toLocaleString());
  setText(
    "wait-eta",
    place.status === "admitted" ? "Now" : place.etaSeconds === null ? "Paused for now" : formatEta(place.etaSeconds),
  );
  setText(
    "wait-eta-note",
    place.status === "waiting" && place.etaSeconds === null
      ? "Admission is paused by the organiser. Your place is kept while this page stays open."
      : "",
  );

  // Progress: how much of the line that was ahead of us (at its longest) has gone through.
  if (place.status === "waiting") {
    session.firstAhead = Math.max(session.firstAhead ?? 0, place.ahead);
    save();
  }
  const first = session.firstAhead ?? 0;
  const share =
    place.status === "admitted"
      ? 1
      : place.status === "waiting"
        ? first === 0
          ? 1
          : (first - place.ahead) / first
        : 0;
  const pct = Math.round(Math.max(0, Math.min(1, share)) * 100);
  const bar = byId("wait-progress");
  bar.setAttribute("aria-valuenow", String(pct));
  bar.setAttribute(
    "aria-valuetext",
    place.status === "prequeue" ? "Waiting for the on-sale" : `${pct}% of the way to the front`,
  );
  byId("wait-progress-fill").style.width = `${pct}%`;
  setText(
    "wait-progress-label",
    place.status === "prequeue" ? "Waiting for the on-sale" : `${pct}% of the way to the front`,
  );
}

function renderLottery() {
  if (!info) return;
  setText("lottery-commitment", info.lottery.commitment);
  const seed = info.lottery.seed;
  byId("lottery-revealed").hidden = !seed;
  byId("lottery-pending").hidden = Boolean(seed);
  if (!seed) return;
  setText("lottery-seed", seed);
  setText("lottery-verify", `printf %s ${seed} | sha256sum`);
  void checkSeed(seed, info.lottery.commitment);
}

/** Recomputes SHA-256(seed) in the browser, where WebCrypto is available (https or localhost). */
async function checkSeed(seed: string, commitment: string) {
  const out = byId("lottery-check");
  if (!globalThis.crypto?.subtle) {
    out.textContent = "";
    return;
  }
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(seed));
  const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  const ok = hex === commitment.toLowerCase();
  out.dataset.ok = String(ok);
  out.textContent = ok
    ? session.lineRestarted
      ? "✓ Checked in your browser: this seed matches the commitment published when the line was restarted " +
        "(the line before the failure, and its draw, could not be kept)."
      : "✓ Checked in your browser: this seed matches the commitment published before the sale."
    : "✗ This seed does NOT match the published commitment.";
}

function tickCountdown() {
  const row = byId("wait-countdown");
  const onSale = info ? Date.parse(info.onSaleAt) : Number.NaN;
  const left = (onSale - api.now()) / 1000;
  if (!Number.isFinite(left) || left <= 0) {
    row.hidden = true;
    return;
  }
  row.hidden = false;
  setText("wait-countdown-clock", formatClock(Math.ceil(left)));
  setText("wait-onsale-at", new Date(onSale).toLocaleString());
}

// --- seat map ----------------------------------------------------------------------------------

async function enterMap(): Promise<void> {
  clearTimeout(pollTimer);
  if (!session.accessToken || sessionSecondsLeft() <= 0) {
    sessionEnded("Your shopping session has ended.");
    return;
  }
  clearFlash(FLASH);
  show("map");
  tickSession();
  await seatMap.open();
  if (seatMap.eventName) setText("event-name", seatMap.eventName);
}

function sessionSecondsLeft(): number {
  if (!session.accessExpiresAt) return Number.POSITIVE_INFINITY;
  return (Date.parse(session.accessExpiresAt) - api.now()) / 1000;
}

function tickSession() {
  const left = sessionSecondsLeft();
  const el = byId("map-session");
  if (!Number.isFinite(left)) {
    el.textContent = "";
    return;
  }
  el.textContent = `Your shopping session ends in ${formatClock(left)}.`;
  if (left <= 0 && view === "map") sessionEnded("Your shopping session ran out.");
}

function sessionEnded(reason: string) {
  seatMap.clearSelection();
  session.accessToken = undefined;
  session.accessExpiresAt = undefined;
  save();
  if (view !== "start" && view !== "wait") show("wait");
  flash(FLASH, "warning", reason, "Join the line again to keep shopping; you'll go to the back.", [
    { label: "Join the line again", run: () => void rejoin() },
  ]);
}

// --- checkout ----------------------------------------------------------------------------------

function enterCheckout(hold: Hold) {
  session.hold = { ...hold };
  session.payment = undefined;
  warnedHoldEnding = false;
  save();
  seatMap.clearSelection();
  clearFlash(FLASH);
  renderCheckout(session.hold);
  show("checkout");
  tickHold();
}

function holdLabel(hold: StoredHold | StoredPurchase): string[] {
  if (hold.generalAdmission)
    return [`${plural(hold.generalAdmission.quantity, "standing place")} (${hold.generalAdmission.id})`];
  return hold.seats;
}

function renderCheckout(hold: StoredHold) {
  byId("checkout-seats").replaceChildren(...holdLabel(hold).map((s) => h("li", {}, s)));
  setText("checkout-total", formatMoney(hold.amount));
  const pay = byId<HTMLButtonElement>("checkout-pay");
  pay.textContent = `Pay ${formatMoney(hold.amount)}`;
  setPaying(false);
  byId("checkout-pending").hidden = true;
  byId("checkout-expired").hidden = true;
  byId<HTMLFormElement>("checkout-form").hidden = false;
}

function holdSecondsLeft(): number {
  return session.hold ? (Date.parse(session.hold.expiresAt) - api.now()) / 1000 : 0;
}

function tickHold() {
  if (view !== "checkout" || !session.hold) return;
  const left = holdSecondsLeft();
  setText("checkout-timer", left > 0 ? formatClock(left) : "0:00");
  byId("checkout-timer-row").dataset.urgent = String(left < 60);
  if (left <= 60 && left > 0 && !warnedHoldEnding && !paying) {
    warnedHoldEnding = true;
    flash(FLASH, "info", "Less than a minute left on your hold.", "Pay now to keep your seats.");
  }
  if (left <= 0 && !paying && byId("checkout-pending").hidden) holdExpired(false);
}

function holdExpired(refunded: boolean) {
  byId<HTMLFormElement>("checkout-form").hidden = true;
  byId("checkout-pending").hidden = true;
  byId("checkout-expired").hidden = false;
  session.hold = undefined;
  session.payment = undefined;
  save();
  flash(
    FLASH,
    "warning",
    "Your hold has expired and the seats were released.",
    refunded ? "Your bank answered too late, so the charge was refunded in full." : "You can pick seats again.",
    [{ label: "Back to the seat map", run: () => void backToMap() }],
  );
}

async function backToMap() {
  clearTimeout(purchaseTimer);
  session.hold = undefined;
  session.payment = undefined;
  save();
  await enterMap();
}

function setPaying(on: boolean) {
  paying = on;
  const pay = byId<HTMLButtonElement>("checkout-pay");
  pay.disabled = on;
  byId<HTMLButtonElement>("checkout-release").disabled = on;
  byId<HTMLSelectElement>("checkout-token").disabled = on;
  if (on) pay.textContent = "Paying…";
  else if (session.hold) pay.textContent = `Pay ${formatMoney(session.hold.amount)}`;
}

async function pay(): Promise<void> {
  const hold = session.hold;
  const token = session.accessToken;
  if (!hold || paying) return;
  if (!token) {
    sessionEnded("Your shopping session has ended.");
    return;
  }
  const paymentToken = byId<HTMLSelectElement>("checkout-token").value;
  // The same key only to repeat an attempt whose answer never arrived; anything else is a new attempt.
  let attempt = session.payment;
  if (!attempt || attempt.settled || attempt.holdId !== hold.holdId || attempt.paymentToken !== paymentToken) {
    attempt = { key: `pay-${randomHex(12)}`, holdId: hold.holdId, paymentToken, settled: false };
  }
  session.payment = attempt;
  save();
  clearFlash(FLASH);
  setPaying(true);
  const res = await api.call<Purchase>(
    "POST",
    `/v1/events/${encodeURIComponent(eventId)}/holds/${encodeURIComponent(hold.holdId)}/purchase`,
    { token, headers: { "Idempotency-Key": attempt.key }, json: { paymentToken }, timeoutMs: 60_000 },
  );
  setPaying(false);
  if (!res.ok && res.status === 0) {
    flash(
      FLASH,
      "warning",
      "We didn't hear back about your payment.",
      "Press Pay again: it is safe, you will not be charged twice.",
    );
    return;
  }
  attempt.settled = true;
  save();
  if (res.ok) {
    if (res.body.status === "confirmed") return confirmed(res.body);
    return awaitPayment(res.body.purchaseId);
  }
  const { code, message, details } = res.error;
  switch (code) {
    case "payment_declined":
      flash(
        FLASH,
        "error",
        "Your card was declined.",
        `Nothing was charged. Your seats stay held for ${formatClock(holdSecondsLeft())}: try another card.`,
      );
      byId("checkout-token").focus();
      return;
    case "hold_expired":
    case "not_found":
      holdExpired(details?.refunded === true);
      return;
    case "unauthenticated":
      sessionEnded("Your shopping session has ended.");
      return;
    case "unavailable":
      flash(
        FLASH,
        "warning",
        "The payment provider had a problem.",
        "Nothing was charged. Please try again in a moment.",
      );
      return;
    default:
      flash(FLASH, "error", "The payment didn't go through.", message);
  }
}

/** 202: the bank has not answered yet. The purchase settles on its own; we keep asking. */
function awaitPayment(purchaseId: string) {
  session.purchase = {
    purchaseId,
    status: "pending",
    seats: session.hold?.seats ?? [],
    amount: session.hold?.amount ?? 0,
  };
  if (session.hold?.generalAdmission) session.purchase.generalAdmission = session.hold.generalAdmission;
  save();
  byId<HTMLFormElement>("checkout-form").hidden = true;
  byId("checkout-pending").hidden = false;
  setText("checkout-purchase-id", purchaseId);
  byId("checkout-pending").focus();
  let attempts = 0;
  const check = async () => {
    attempts++;
    const res = await api.call<Purchase>("GET", `/v1/purchases/${encodeURIComponent(purchaseId)}`, {
      token: session.accessToken,
    });
    const next = Math.min(5, 1 + attempts * 0.5);
    if (!res.ok) {
      purchaseTimer = setTimeout(() => void check(), next * 1000);
      return;
    }
    switch (res.body.status) {
      case "confirmed":
        confirmed(res.body);
        return;
      case "refunded":
        session.purchase = undefined;
        holdExpired(true);
        return;
      case "failed":
        session.purchase = undefined;
        save();
        byId("checkout-pending").hidden = true;
        byId<HTMLFormElement>("checkout-form").hidden = false;
        flash(
          FLASH,
          "error",
          "Your bank turned the payment down.",
          "Nothing was charged. You can try another card while the seats are held.",
        );
        return;
      default:
        purchaseTimer = setTimeout(() => void check(), next * 1000);
    }
  };
  purchaseTimer = setTimeout(() => void check(), 1000);
}

function confirmed(purchase: Purchase) {
  clearTimeout(purchaseTimer);
  const stored: StoredPurchase = {
    purchaseId: purchase.purchaseId,
    status: "confirmed",
    seats: purchase.seats ?? session.hold?.seats ?? [],
    amount: purchase.amount ?? session.hold?.amount ?? 0,
  };
  const area = purchase.generalAdmission ?? session.hold?.generalAdmission;
  if (area) stored.generalAdmission = area;
  // The purchase ends the shopping session: only the receipt is worth keeping.
  session = { fanId: session.fanId, purchase: stored };
  save();
  renderDone(stored);
  clearFlash(FLASH);
  show("done");
}

function renderDone(purchase: StoredPurchase) {
  setText("done-purchase-id", purchase.purchaseId);
  byId("done-seats").replaceChildren(...holdLabel(purchase).map((s) => h("li", {}, s)));
  setText("done-total", formatMoney(purchase.amount));
}

async function release() {
  const hold = session.hold;
  if (!hold) return backToMap();
  byId<HTMLButtonElement>("checkout-release").disabled = true;
  await api.call("DELETE", `/v1/events/${encodeURIComponent(eventId)}/holds/${encodeURIComponent(hold.holdId)}`, {
    token: session.accessToken,
  });
  flash(FLASH, "info", "Your seats were released.", "Pick again whenever you're ready.");
  await backToMap();
}

// --- boot ----------------------------------------------------------------------------------

function start() {
  const base = api.base;
  if (apiIsElsewhere(base)) {
    const note = byId("api-note");
    note.hidden = false;
    note.textContent = `This page talks to the box office at ${base}.`;
  }
  setText("event-id", eventId);
  initStart();
  byId<HTMLFormElement>("checkout-form").addEventListener("submit", (event) => {
    event.preventDefault();
    void pay();
  });
  byId("checkout-release").addEventListener("click", () => void release());
  byId("checkout-back").addEventListener("click", () => void backToMap());
  byId("done-restart").addEventListener("click", () => {
    clearSession(eventId);
    session = { fanId: session.fanId };
    byId<HTMLInputElement>("start-fan").value = session.fanId;
    show("start");
  });
  setInterval(() => {
    if (view === "wait") tickCountdown();
    if (view === "map") tickSession();
    if (view === "checkout") tickHold();
  }, 1000);

  void api.call<SeatMapSummary>("GET", `/v1/events/${encodeURIComponent(eventId)}/seatmap`).then((res) => {
    if (res.ok && res.body.name) {
      setText("event-name", res.body.name);
      document.title = `${res.body.name}: tickets`;
    }
  });

  // Pick up where this tab was.
  const saved = loadSession(eventId);
  if (!saved) {
    show("start", false);
    void loadInfo();
    return;
  }
  session = saved;
  if (session.purchase?.status === "confirmed") {
    renderDone(session.purchase);
    show("done", false);
  } else if (session.purchase?.status === "pending" && session.hold) {
    renderCheckout(session.hold);
    show("checkout", false);
    awaitPayment(session.purchase.purchaseId);
  } else if (session.hold && holdSecondsLeft() > 0 && session.accessToken) {
    renderCheckout(session.hold);
    show("checkout", false);
  } else if (session.accessToken && sessionSecondsLeft() > 0) {
    void enterMap();
  } else if (session.queueToken) {
    show("wait", false);
    void loadInfo();
    void poll();
  } else {
    show("start", false);
    void loadInfo();
  }
}

start();
