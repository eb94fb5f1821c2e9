/**
 * The fan page's DOM: one section per stage of the model (fan-model.ts), drawn from the model's
 * state when the model says the stage or a part of it changed, and the forms and buttons that
 * call back into it.
 */
import { byId, clearFlash, h, setText, showMessage } from "./dom.js";
import type { CheckoutPhase, FanModel, FanView, Stage } from "./fan-model.js";
import type { StoredHold, StoredPurchase } from "./fan-session.js";
import { formatClock, formatEta, formatMoney, type Message, plural } from "./format.js";
import type { QueueStatus, SeatOdds, WaitingRoomInfo } from "./types.js";

const VIEWS = ["start", "wait", "map", "checkout", "done"] as const;

const STATUS_LABEL: Record<string, string> = {
  prequeue: "In the pre-queue",
  waiting: "In line",
  admitted: "It's your turn!",
  abandoned: "Place released",
  expired: "Session ended",
  completed: "Done",
  revoked: "Session ended by the organiser",
};

function holdLabel(hold: StoredHold | StoredPurchase): string[] {
  if (hold.generalAdmission)
    return [`${plural(hold.generalAdmission.quantity, "standing place")} (${hold.generalAdmission.id})`];
  return hold.seats;
}

export class FanPage implements FanView {
  constructor(
    private readonly model: FanModel,
    private readonly flashRegion: string,
  ) {}

  show(stage: Stage, focus: boolean): void {
    if (stage === "checkout") this.renderCheckout();
    if (stage === "done") this.renderDone();
    for (const name of VIEWS) byId(`view-${name}`).hidden = name !== stage;
    document.body.dataset.view = stage;
    if (focus) byId(`${stage}-title`).focus();
  }

  private renderCheckout() {
    const hold = this.model.session.hold;
    if (!hold) return;
    byId("checkout-seats").replaceChildren(...holdLabel(hold).map((s) => h("li", {}, s)));
    setText("checkout-total", formatMoney(hold.amount));
    this.checkoutPhase(this.model.phase);
  }

  checkoutPhase(phase: CheckoutPhase): void {
    const paying = phase === "paying";
    byId<HTMLFormElement>("checkout-form").hidden = !(phase === "form" || paying || phase === "releasing");
    byId("checkout-pending").hidden = phase !== "pending";
    byId("checkout-expired").hidden = phase !== "expired";
    const pay = byId<HTMLButtonElement>("checkout-pay");
    pay.disabled = paying;
    byId<HTMLButtonElement>("checkout-release").disabled = paying || phase === "releasing";
    byId<HTMLSelectElement>("checkout-token").disabled = paying;
    const hold = this.model.session.hold;
    if (paying) pay.textContent = "Paying…";
    else if (hold) pay.textContent = `Pay ${formatMoney(hold.amount)}`;
    if (phase === "pending") {
      setText("checkout-purchase-id", this.model.session.purchase?.purchaseId ?? "");
      byId("checkout-pending").focus();
    }
  }

  private renderDone() {
    const purchase = this.model.session.purchase;
    if (!purchase) return;
    setText("done-purchase-id", purchase.purchaseId);
    byId("done-seats").replaceChildren(...holdLabel(purchase).map((s) => h("li", {}, s)));
    setText("done-total", formatMoney(purchase.amount));
  }

  joining(busy: boolean): void {
    byId<HTMLButtonElement>("start-join").disabled = busy;
  }

  place(place: QueueStatus, progress: number): void {
    setText("wait-status", STATUS_LABEL[place.status] ?? place.status);
    byId("wait-panel").dataset.status = place.status;
    const prequeue = place.status === "prequeue";
    const admitted = place.status === "admitted";
    setText("wait-position", `#${place.position.toLocaleString()}${prequeue ? " to arrive" : ""}`);
    setText(
      "wait-position-note",
      prequeue ? "Places are drawn at random when the sale opens: arriving early doesn't put you ahead." : "",
    );
    setText("wait-ahead", admitted ? "0" : place.ahead.toLocaleString());
    // A pre-queued fan with no ETA: the sale opened and the draw waits for its public random value.
    const unknown = prequeue ? "After the draw" : "Paused for now";
    setText("wait-eta", admitted ? "Now" : place.etaSeconds === null ? unknown : formatEta(place.etaSeconds));
    setText(
      "wait-eta-note",
      place.etaSeconds !== null
        ? ""
        : prequeue
          ? "The sale has opened: places are being drawn, once the draw's public random value is in. Keep this page open."
          : place.status === "waiting"
            ? "Admission is paused by the organiser. Your place is kept while this page stays open."
            : "",
    );
    this.odds(admitted ? undefined : place.odds);
    const label = prequeue ? "Waiting for the on-sale" : `${progress}% of the way to the front`;
    const bar = byId("wait-progress");
    bar.setAttribute("aria-valuenow", String(progress));
    bar.setAttribute("aria-valuetext", label);
    byId("wait-progress-fill").style.width = `${progress}%`;
    setText("wait-progress-label", label);
  }

  /** The chance of a seat, said plainly, with what it rests on. */
  private odds(odds: SeatOdds | undefined): void {
    byId("wait-odds-row").hidden = odds === undefined;
    if (!odds) {
      setText("wait-odds-note", "");
      return;
    }
    setText("wait-odds", oddsWord(odds));
    const left = `${odds.seatsLeft.toLocaleString()} ${odds.seatsLeft === 1 ? "ticket" : "tickets"} left`;
    const ahead = `${odds.fansAhead.toLocaleString()} ${odds.fansAhead === 1 ? "fan" : "fans"} ahead of you`;
    setText(
      "wait-odds-note",
      odds.basis === "conversion"
        ? `${left}; ${ahead}, who so far take ${odds.seatsPerFan.toLocaleString()} each on average. An estimate: it changes as the sale goes.`
        : `${left}; ${ahead}. Too early to know how many each takes, so this assumes the most each may take.`,
    );
  }

  lottery(info: WaitingRoomInfo): void {
    setText("lottery-commitment", info.lottery.commitment);
    // The same event and ?api=, nothing else: an ?invite= token has no business in another address.
    const here = new URLSearchParams(location.search);
    const carried = new URLSearchParams();
    for (const name of ["event", "api"]) {
      const value = here.get(name);
      if (value !== null) carried.set(name, value);
    }
    byId<HTMLAnchorElement>("lottery-link").search = carried.toString();
    const seed = info.lottery.seed;
    this.beacon(info);
    byId("lottery-revealed").hidden = !seed;
    byId("lottery-pending").hidden = Boolean(seed);
    if (!seed) return;
    setText("lottery-seed", seed);
    setText("lottery-verify", `printf %s ${seed} | sha256sum`);
  }

  /** Where the draw's random value comes from, and why the draw is late when it waits for it. */
  private beacon(info: WaitingRoomInfo): void {
    const out = byId("lottery-beacon");
    const drand = info.lottery.drand;
    out.hidden = !drand;
    if (!drand) return;
    const chain = drand.knownAs ? `drand ${drand.knownAs}` : `the drand chain ${drand.chainHash.slice(0, 16)}…`;
    const at = new Date(drand.roundAt).toLocaleTimeString();
    out.textContent = info.lottery.awaitingBeacon
      ? `The draw is waiting for round ${drand.round} of ${chain}, due at ${at}: a public random value nobody at the box office can choose. The order is drawn as soon as it is in; until then nobody has a place, and nobody loses one.`
      : `The draw also mixes in round ${drand.round} of ${chain} (due at ${at}), a public random value published after the pre-queue closes that nobody at the box office can choose.`;
  }

  seedChecked(matches: boolean | null, lineRestarted: boolean): void {
    const out = byId("lottery-check");
    if (matches === null) {
      out.textContent = "";
      return;
    }
    out.dataset.ok = String(matches);
    out.textContent = matches
      ? lineRestarted
        ? "✓ Checked in your browser: this seed matches the commitment published before the sale " +
          "(the line was restarted after a failure; the seed, kept apart, could not change)."
        : "✓ Checked in your browser: this seed matches the commitment published before the sale."
      : "✗ This seed does NOT match the published commitment.";
  }

  countdown(secondsLeft: number | null, onSaleAt: number): void {
    const row = byId("wait-countdown");
    row.hidden = secondsLeft === null;
    if (secondsLeft === null) return;
    setText("wait-countdown-clock", formatClock(Math.ceil(secondsLeft)));
    setText("wait-onsale-at", new Date(onSaleAt).toLocaleString());
  }

  sessionClock(secondsLeft: number): void {
    byId("map-session").textContent = Number.isFinite(secondsLeft)
      ? `Your shopping session ends in ${formatClock(secondsLeft)}.`
      : "";
  }

  holdClock(secondsLeft: number): void {
    setText("checkout-timer", secondsLeft > 0 ? formatClock(secondsLeft) : "0:00");
    byId("checkout-timer-row").dataset.urgent = String(secondsLeft < 60);
  }

  eventName(name: string, inTitle: boolean): void {
    setText("event-name", name);
    if (inTitle) document.title = `${name}: tickets`;
  }

  message(m: Message): void {
    showMessage(this.flashRegion, m);
  }

  clearMessage(): void {
    clearFlash(this.flashRegion);
  }

  focusPaymentChoice(): void {
    byId("checkout-token").focus();
  }
}

/** The page's address names no event: the note that says so, and no stage of a line. */
export function showNoEvent(): void {
  for (const name of VIEWS) byId(`view-${name}`).hidden = true;
  byId("view-none").hidden = false;
  byId("event-line").hidden = true;
  document.body.dataset.view = "none";
}

/** "Very likely" from 90 %, "No tickets left" when none are, "Unlikely" under 5 %, else the percentage. */
export function oddsWord({ chance, seatsLeft }: Pick<SeatOdds, "chance" | "seatsLeft">): string {
  if (seatsLeft <= 0) return "No tickets left";
  if (chance >= 0.9) return "Very likely";
  if (chance < 0.05) return "Unlikely (under 5%)";
  return `About ${Math.round(chance * 100)}%`;
}
