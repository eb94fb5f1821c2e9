/**
 * The seat map: sections grouped by tier with a live availability meter, one section's seats as
 * a grid that follows the Server-Sent Events stream, seat picking within `maxSeatsPerFan`, and
 * the hold request (with the nearest free seats offered when another fan won the race).
 *
 * Live counts: a `seat` event says what a seat became, not what it was. For the open section the
 * previous status is known; elsewhere a seat that became held was available, one that became
 * available was held, one that became sold was held, which is how seats move. The summary is
 * re-read every half minute and whenever the stream reconnects, so any drift is short-lived.
 */
import type { Api } from "./api.js";
import { byId, flash, formatMoney, h, plural } from "./dom.js";
import type {
  AreaSummary,
  CompactSectionSeats,
  Hold,
  SeatMapSummary,
  SeatStatus,
  SectionSeats,
  SectionSummary,
} from "./types.js";

const STATUS_OF: Record<string, SeatStatus> = { a: "available", h: "held", s: "sold" };

/** The seats of a compact section body, in order (a 1,000-seat section is ~1 KB, not ~37 KB). */
export function expandCompact(body: CompactSectionSeats): SectionSeats["seats"] {
  const seats: SectionSeats["seats"] = [];
  for (const [row, first, count] of body.layout) {
    for (let k = 0; k < count; k++) {
      seats.push({
        id: `${body.sectionId}-${row}-${first + k}`,
        status: STATUS_OF[body.status[seats.length] ?? ""] ?? "sold",
      });
    }
  }
  return seats;
}

export interface SeatMapHooks {
  api: Api;
  eventId: string;
  /** The region messages go to. */
  flashRegion: string;
  accessToken(): string | undefined;
  onHeld(hold: Hold): void;
  onSessionEnded(reason: string): void;
}

interface SeatRef {
  section: string;
  row: string;
  number: string;
}

export function parseSeatId(id: string): SeatRef | null {
  const parts = id.split("-");
  if (parts.length !== 3 || parts.some((p) => p === "")) return null;
  return { section: parts[0]!, row: parts[1]!, number: parts[2]! };
}

export function describeSeat(id: string): string {
  const ref = parseSeatId(id);
  return ref ? `Section ${ref.section}, row ${ref.row}, seat ${ref.number}` : id;
}

/** Numbers in numeric order, anything else after them in text order. */
function compareLabels(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  if (Number.isFinite(na) && Number.isFinite(nb)) return na - nb;
  if (Number.isFinite(na)) return -1;
  if (Number.isFinite(nb)) return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

function listSeats(ids: string[]): string {
  if (ids.length <= 1) return ids.join("");
  return `${ids.slice(0, -1).join(", ")} and ${ids[ids.length - 1]}`;
}

const RESYNC_MS = 30_000;
const STATUS_WORD: Record<SeatStatus, string> = { available: "available", held: "held by another fan", sold: "sold" };

interface SectionCard {
  button: HTMLButtonElement;
  fill: HTMLElement;
  count: HTMLElement;
}

export class SeatMap {
  private summary: SeatMapSummary | null = null;
  private readonly available = new Map<string, number>();
  private readonly areaAvailable = new Map<string, number>();
  private source: EventSource | null = null;
  private wasReady = false;
  private resyncTimer: ReturnType<typeof setInterval> | undefined;
  private openSectionId: string | null = null;
  private loadingSeq = 0;
  private readonly statuses = new Map<string, SeatStatus>();
  private readonly buttons = new Map<string, HTMLButtonElement>();
  private rows: string[][] = [];
  /** Seat events that arrived while the open section was loading. */
  private buffered: { id: string; status: SeatStatus }[] | null = null;
  private readonly selected = new Map<string, number>();
  /** Seats of a hold request not answered yet: their change to `held` may be ours. */
  private readonly inFlight = new Set<string>();
  private readonly cards = new Map<string, SectionCard>();
  private readonly areaCards = new Map<string, SectionCard>();
  private focusedSeat: string | null = null;
  private holding = false;

  constructor(private readonly hooks: SeatMapHooks) {
    byId("map-hold").addEventListener("click", () => void this.holdSelected());
    byId("map-clear").addEventListener("click", () => {
      const ids = [...this.selected.keys()];
      this.selected.clear();
      for (const id of ids) this.paintSeat(id);
      this.renderSelection();
    });
    byId("map-grid").addEventListener("keydown", (event) => this.onGridKey(event));
  }

  get maxSeats(): number {
    return this.summary?.maxSeatsPerFan ?? 8;
  }

  get eventName(): string | undefined {
    return this.summary?.name;
  }

  async open(): Promise<void> {
    this.connect();
    await this.loadSummary();
    if (this.openSectionId) await this.openSection(this.openSectionId);
    clearInterval(this.resyncTimer);
    this.resyncTimer = setInterval(() => void this.resync(), RESYNC_MS);
  }

  close(): void {
    this.source?.close();
    this.source = null;
    this.wasReady = false;
    clearInterval(this.resyncTimer);
    this.resyncTimer = undefined;
    this.setLive("off");
  }

  /** Forgets the selection (after a hold, or when the session ends). */
  clearSelection(): void {
    this.selected.clear();
    for (const id of this.buttons.keys()) this.paintSeat(id);
    this.renderSelection();
  }

  async resync(): Promise<void> {
    await this.loadSummary();
    if (this.openSectionId) await this.openSection(this.openSectionId, { keepFocus: true });
  }

  // --- live updates -------------------------------------------------------------------------

  private connect() {
    if (this.source) return;
    const source = new EventSource(
      this.hooks.api.url(`/v1/events/${encodeURIComponent(this.hooks.eventId)}/seatmap/stream`),
    );
    this.source = source;
    this.setLive("connecting");
    source.addEventListener("ready", () => {
      this.setLive("live");
      // After a reconnect, changes may have been missed: read the truth again.
      if (this.wasReady) void this.resync();
      this.wasReady = true;
    });
    source.addEventListener("seat", (event) => {
      try {
        const change = JSON.parse((event as MessageEvent<string>).data) as { id?: unknown; status?: unknown };
        if (
          typeof change.id === "string" &&
          (change.status === "available" || change.status === "held" || change.status === "sold")
        ) {
          this.onSeatChange(change.id, change.status);
        }
      } catch {
        // a malformed event changes nothing
      }
    });
    source.addEventListener("error", () =>
      this.setLive(source.readyState === EventSource.CLOSED ? "off" : "connecting"),
    );
  }

  private setLive(state: "live" | "connecting" | "off") {
    const el = byId("map-live");
    el.dataset.state = state;
    el.textContent =
      state === "live"
        ? "Live: seats update as other fans choose"
        : state === "connecting"
          ? "Reconnecting to live updates…"
          : "Live updates off";
  }

  private onSeatChange(id: string, status: SeatStatus) {
    const ref = parseSeatId(id);
    if (!ref) return;
    if (this.buffered && ref.section === this.openSectionId) this.buffered.push({ id, status });

    if (ref.section === this.openSectionId && this.buttons.has(id)) {
      this.setStatus(id, status);
    } else {
      // Not on screen: infer what it was from how seats move.
      this.adjustAvailable(ref.section, status === "held" ? -1 : status === "available" ? 1 : 0);
    }
    if (status !== "available" && this.selected.has(id) && !this.inFlight.has(id)) {
      this.selected.delete(id);
      this.paintSeat(id);
      this.renderSelection();
      this.tellLost([id]);
    }
  }

  /** A seat of the open section changed: repaint it and keep its section's count exact. */
  private setStatus(id: string, status: SeatStatus) {
    const previous = this.statuses.get(id);
    if (previous === status) return;
    this.statuses.set(id, status);
    const section = parseSeatId(id)?.section;
    if (section && previous !== undefined) {
      this.adjustAvailable(section, Number(status === "available") - Number(previous === "available"));
    }
    this.paintSeat(id);
  }

  private adjustAvailable(sectionId: string, delta: number) {
    const count = this.available.get(sectionId);
    if (count === undefined || delta === 0) return;
    this.available.set(sectionId, Math.max(0, count + delta));
    this.paintCard(sectionId);
  }

  // --- summary: tiers, sections, standing areas -------------------------------------------

  private async loadSummary(): Promise<void> {
    const res = await this.hooks.api.call<SeatMapSummary>(
      "GET",
      `/v1/events/${encodeURIComponent(this.hooks.eventId)}/seatmap`,
    );
    if (!res.ok) {
      if (!this.summary) {
        flash(this.hooks.flashRegion, "warning", "The seat map did not load.", res.error.message, [
          { label: "Try again", run: () => void this.loadSummary() },
        ]);
      }
      return;
    }
    this.summary = res.body;
    for (const s of res.body.sections) this.available.set(s.id, s.available);
    for (const a of res.body.generalAdmission) this.areaAvailable.set(a.id, a.available);
    byId("map-limit").textContent =
      `Pick up to ${plural(this.maxSeats, "seat")}. Seats are yours once held; you then have ${
        res.body.holdSeconds ? `${Math.round(res.body.holdSeconds / 60)} minutes` : "a few minutes"
      } to pay.`;
    this.renderTiers(res.body.sections, res.body.generalAdmission);
    this.renderSelection();
  }

  private renderTiers(sections: SectionSummary[], areas: AreaSummary[]) {
    const byTier = new Map<string, { sections: SectionSummary[]; areas: AreaSummary[] }>();
    const tierOf = (tier: string) => {
      let entry = byTier.get(tier);
      if (!entry) {
        entry = { sections: [], areas: [] };
        byTier.set(tier, entry);
      }
      return entry;
    };
    for (const s of sections) tierOf(s.tier).sections.push(s);
    for (const a of areas) tierOf(a.tier).areas.push(a);

    this.cards.clear();
    this.areaCards.clear();
    const root = byId("map-tiers");
    root.replaceChildren(
      ...[...byTier.entries()].map(([tier, entry]) => {
        const prices = [...entry.sections.map((s) => s.price), ...entry.areas.map((a) => a.price)];
        const low = Math.min(...prices);
        const high = Math.max(...prices);
        const priceText = low === high ? formatMoney(low) : `${formatMoney(low)}–${formatMoney(high)}`;
        return h(
          "section",
          { class: "tier", "aria-label": `${tier} tier` },
          h("h3", {}, tier, " ", h("span", { class: "tier-price" }, priceText)),
          h(
            "ul",
            { class: "cards" },
            ...entry.sections.map((s) => h("li", {}, this.sectionCard(s))),
            ...entry.areas.map((a) => h("li", {}, this.areaCard(a))),
          ),
        );
      }),
    );
    for (const id of this.cards.keys()) this.paintCard(id);
    for (const id of this.areaCards.keys()) this.paintArea(id);
  }

  private sectionCard(s: SectionSummary): HTMLElement {
    const fill = h("span", { class: "fill" });
    const count = h("span", { class: "count" });
    const button = h(
      "button",
      {
        type: "button",
        class: "card section-card",
        "data-section": s.id,
        "aria-pressed": String(this.openSectionId === s.id),
        "aria-controls": "map-section",
        onclick: () => void this.openSection(s.id),
      },
      h("span", { class: "card-name" }, `Section ${s.id}`),
      h("span", { class: "card-price" }, `${formatMoney(s.price)} per seat`),
      h("span", { class: "meter", "aria-hidden": "true" }, fill),
      count,
    );
    this.cards.set(s.id, { button, fill, count });
    return button;
  }

  private areaCard(a: AreaSummary): HTMLElement {
    const fill = h("span", { class: "fill" });
    const count = h("span", { class: "count" });
    const inputId = `ga-qty-${a.id}`;
    const quantity = h("input", {
      id: inputId,
      type: "number",
      min: 1,
      max: this.maxSeats,
      value: 1,
      inputmode: "numeric",
      class: "qty",
    });
    const button = h(
      "button",
      {
        type: "button",
        class: "secondary",
        onclick: () => void this.holdArea(a.id, Number(quantity.value)),
      },
      "Hold standing places",
    );
    const card = h(
      "div",
      { class: "card area-card", "data-area": a.id },
      h("span", { class: "card-name" }, `General admission ${a.id}`),
      h("span", { class: "card-price" }, `${formatMoney(a.price)} per place · standing, no seat numbers`),
      h("span", { class: "meter", "aria-hidden": "true" }, fill),
      count,
      h("span", { class: "area-form" }, h("label", { for: inputId }, "Places"), quantity, button),
    );
    this.areaCards.set(a.id, { button, fill, count });
    return card;
  }

  private paintCard(sectionId: string) {
    const card = this.cards.get(sectionId);
    const section = this.summary?.sections.find((s) => s.id === sectionId);
    if (!card || !section) return;
    const left = this.available.get(sectionId) ?? section.available;
    const share = section.total > 0 ? left / section.total : 0;
    card.fill.style.width = `${Math.round(share * 100)}%`;
    card.fill.dataset.level = share === 0 ? "none" : share < 0.15 ? "low" : "ok";
    card.count.textContent =
      left === 0 ? "Sold out" : `${left.toLocaleString()} of ${section.total.toLocaleString()} left`;
    card.button.setAttribute("aria-pressed", String(this.openSectionId === sectionId));
  }

  private paintArea(areaId: string) {
    const card = this.areaCards.get(areaId);
    const area = this.summary?.generalAdmission.find((a) => a.id === areaId);
    if (!card || !area) return;
    const left = this.areaAvailable.get(areaId) ?? area.available;
    const share = area.capacity > 0 ? left / area.capacity : 0;
    card.fill.style.width = `${Math.round(share * 100)}%`;
    card.fill.dataset.level = share === 0 ? "none" : share < 0.15 ? "low" : "ok";
    card.count.textContent =
      left === 0 ? "Sold out" : `${left.toLocaleString()} of ${area.capacity.toLocaleString()} left`;
    card.button.toggleAttribute("disabled", left === 0);
  }

  // --- one section's seats ----------------------------------------------------------------

  async openSection(sectionId: string, options: { keepFocus?: boolean } = {}): Promise<void> {
    const section = this.summary?.sections.find((s) => s.id === sectionId);
    if (!section) return;
    const switching = this.openSectionId !== sectionId;
    this.openSectionId = sectionId;
    for (const id of this.cards.keys()) this.paintCard(id);
    const seq = ++this.loadingSeq;
    this.buffered = [];
    byId("map-section").hidden = false;
    byId("map-section-title").textContent =
      `Section ${section.id} · ${section.tier} · ${formatMoney(section.price)} per seat`;
    if (switching) {
      byId("map-grid").replaceChildren(h("p", { class: "muted" }, "Loading seats…"));
    }

    const res = await this.hooks.api.call<CompactSectionSeats>(
      "GET",
      `/v1/events/${encodeURIComponent(this.hooks.eventId)}/sections/${encodeURIComponent(sectionId)}/seats?format=compact`,
    );
    if (seq !== this.loadingSeq) return; // another section was opened meanwhile
    if (!res.ok) {
      this.buffered = null;
      byId("map-grid").replaceChildren(h("p", { class: "muted" }, `The seats did not load (${res.error.message}).`));
      return;
    }
    this.statuses.clear();
    for (const seat of expandCompact(res.body)) this.statuses.set(seat.id, seat.status);
    for (const change of this.buffered ?? []) this.statuses.set(change.id, change.status);
    this.buffered = null;
    let left = 0;
    for (const status of this.statuses.values()) if (status === "available") left++;
    this.available.set(sectionId, left);
    this.paintCard(sectionId);
    // Seats picked earlier that another fan took while we were not looking.
    const gone = [...this.selected.keys()].filter(
      (id) => parseSeatId(id)?.section === sectionId && this.statuses.get(id) !== "available",
    );
    for (const id of gone) this.selected.delete(id);
    this.renderGrid(options.keepFocus === true);
    this.renderSelection();
    if (gone.length > 0) this.tellLost(gone);
    if (switching && !options.keepFocus) byId("map-section-title").focus();
  }

  private renderGrid(keepFocus: boolean) {
    const grid = byId("map-grid");
    const hadFocus = keepFocus && grid.contains(document.activeElement);
    const byRow = new Map<string, string[]>();
    for (const id of this.statuses.keys()) {
      const ref = parseSeatId(id);
      if (!ref) continue;
      let row = byRow.get(ref.row);
      if (!row) {
        row = [];
        byRow.set(ref.row, row);
      }
      row.push(id);
    }
    const rowNames = [...byRow.keys()].sort(compareLabels);
    this.rows = rowNames.map((r) =>
      (byRow.get(r) ?? []).sort((a, b) => compareLabels(parseSeatId(a)!.number, parseSeatId(b)!.number)),
    );
    this.buttons.clear();
    if (!this.focusedSeat || !this.statuses.has(this.focusedSeat)) this.focusedSeat = this.rows[0]?.[0] ?? null;

    grid.replaceChildren(
      ...this.rows.map((ids, i) =>
        h(
          "div",
          { class: "seat-row" },
          h("span", { class: "row-label", "aria-hidden": "true" }, rowNames[i] ?? ""),
          ...ids.map((id) => {
            const button = h("button", { type: "button", class: "seat", "data-seat": id, tabindex: -1 });
            button.addEventListener("click", () => this.toggle(id));
            button.addEventListener("focus", () => this.setRovingFocus(id));
            this.buttons.set(id, button);
            this.paintSeat(id);
            return button;
          }),
        ),
      ),
    );
    if (this.focusedSeat) this.buttons.get(this.focusedSeat)?.setAttribute("tabindex", "0");
    if (hadFocus && this.focusedSeat) this.buttons.get(this.focusedSeat)?.focus();
  }

  private paintSeat(id: string) {
    const button = this.buttons.get(id);
    if (!button) return;
    const status = this.statuses.get(id) ?? "sold";
    const mine = this.selected.has(id);
    const ref = parseSeatId(id);
    button.dataset.status = status;
    button.classList.toggle("selected", mine);
    button.setAttribute("aria-pressed", String(mine));
    button.setAttribute("aria-disabled", String(status !== "available" && !mine));
    button.textContent = mine ? "✓" : status === "available" ? (ref?.number ?? "") : status === "held" ? "H" : "×";
    const price = this.summary?.sections.find((s) => s.id === ref?.section)?.price;
    button.setAttribute(
      "aria-label",
      `${describeSeat(id)}, ${mine ? "your pick" : STATUS_WORD[status]}${status === "available" && price !== undefined ? `, ${formatMoney(price)}` : ""}`,
    );
    button.title = `Row ${ref?.row} seat ${ref?.number}: ${mine ? "your pick" : STATUS_WORD[status]}`;
  }

  private setRovingFocus(id: string) {
    if (this.focusedSeat && this.focusedSeat !== id) this.buttons.get(this.focusedSeat)?.setAttribute("tabindex", "-1");
    this.focusedSeat = id;
    this.buttons.get(id)?.setAttribute("tabindex", "0");
  }

  /** Arrow keys move between seats, Home/End to the ends of a row; one Tab stop for the grid. */
  private onGridKey(event: KeyboardEvent) {
    if (!this.focusedSeat) return;
    const rowIndex = this.rows.findIndex((r) => r.includes(this.focusedSeat!));
    if (rowIndex < 0) return;
    const row = this.rows[rowIndex]!;
    const col = row.indexOf(this.focusedSeat);
    let next: string | undefined;
    switch (event.key) {
      case "ArrowLeft":
        next = row[Math.max(0, col - 1)];
        break;
      case "ArrowRight":
        next = row[Math.min(row.length - 1, col + 1)];
        break;
      case "ArrowUp": {
        const above = this.rows[rowIndex - 1];
        next = above?.[Math.min(col, above.length - 1)];
        break;
      }
      case "ArrowDown": {
        const below = this.rows[rowIndex + 1];
        next = below?.[Math.min(col, below.length - 1)];
        break;
      }
      case "Home":
        next = row[0];
        break;
      case "End":
        next = row[row.length - 1];
        break;
      default:
        return;
    }
    event.preventDefault();
    if (next) {
      this.setRovingFocus(next);
      this.buttons.get(next)?.focus();
    }
  }

  private toggle(id: string) {
    if (this.holding) return;
    if (this.selected.has(id)) {
      this.selected.delete(id);
    } else {
      const status = this.statuses.get(id);
      if (status !== "available") {
        flash(
          this.hooks.flashRegion,
          "info",
          `${describeSeat(id)} is ${STATUS_WORD[status ?? "sold"]}.`,
          "Pick a green seat.",
        );
        return;
      }
      if (this.selected.size >= this.maxSeats) {
        flash(
          this.hooks.flashRegion,
          "info",
          `You can pick up to ${plural(this.maxSeats, "seat")}.`,
          "Unpick one to choose another.",
        );
        return;
      }
      const price = this.summary?.sections.find((s) => s.id === parseSeatId(id)?.section)?.price ?? 0;
      this.selected.set(id, price);
    }
    this.paintSeat(id);
    this.renderSelection();
  }

  private renderSelection() {
    const ids = [...this.selected.keys()];
    const total = [...this.selected.values()].reduce((a, b) => a + b, 0);
    const hold = byId<HTMLButtonElement>("map-hold");
    // The bar follows the fan down the page only when there is something to hold.
    byId("map-selection").dataset.empty = String(ids.length === 0);
    byId("map-selection-text").textContent =
      ids.length === 0
        ? "No seats picked yet."
        : `${plural(ids.length, "seat")}: ${ids.join(", ")} · ${formatMoney(total)}`;
    hold.disabled = ids.length === 0 || this.holding;
    hold.textContent = this.holding ? "Holding…" : ids.length > 1 ? `Hold these ${ids.length} seats` : "Hold this seat";
    byId<HTMLButtonElement>("map-clear").disabled = ids.length === 0 || this.holding;
  }

  // --- holds -------------------------------------------------------------------------------

  private async holdSelected(): Promise<void> {
    const seats = [...this.selected.keys()];
    if (seats.length === 0 || this.holding) return;
    await this.requestHold({ seats }, seats);
  }

  private async holdArea(areaId: string, quantity: number): Promise<void> {
    if (!Number.isInteger(quantity) || quantity < 1) {
      flash(this.hooks.flashRegion, "info", "Choose how many standing places you want (at least 1).");
      return;
    }
    if (quantity > this.maxSeats) {
      flash(this.hooks.flashRegion, "info", `You can hold up to ${plural(this.maxSeats, "place")}.`);
      return;
    }
    await this.requestHold({ generalAdmission: { id: areaId, quantity } }, []);
  }

  private async requestHold(body: unknown, seats: string[]): Promise<void> {
    const token = this.hooks.accessToken();
    if (!token) {
      this.hooks.onSessionEnded("Your shopping session has ended.");
      return;
    }
    this.holding = true;
    for (const id of seats) this.inFlight.add(id);
    this.renderSelection();
    const res = await this.hooks.api.call<Hold>("POST", `/v1/events/${encodeURIComponent(this.hooks.eventId)}/holds`, {
      token,
      json: body,
    });
    this.holding = false;
    for (const id of seats) this.inFlight.delete(id);
    this.renderSelection();
    if (res.ok) {
      this.hooks.onHeld(res.body);
      return;
    }
    const { error } = res;
    switch (error.code) {
      case "seat_unavailable": {
        const lost = Array.isArray(error.details?.seats)
          ? (error.details.seats as unknown[]).filter((s) => typeof s === "string")
          : [];
        if (lost.length > 0) {
          for (const id of lost) {
            this.selected.delete(id);
            // The stream will say held or sold; until then it is not available, that much is sure.
            if (this.statuses.get(id) === "available") this.setStatus(id, "held");
            else this.paintSeat(id);
          }
          this.renderSelection();
          this.tellLost(lost);
        } else {
          const left = typeof error.details?.available === "number" ? error.details.available : null;
          flash(
            this.hooks.flashRegion,
            "warning",
            left === null ? "Those places just went." : `Only ${plural(left, "place")} left there now.`,
            left ? "Try a smaller number." : "Try another area or section.",
          );
          void this.loadSummary();
        }
        return;
      }
      case "seat_limit_exceeded":
        flash(this.hooks.flashRegion, "info", `You can hold up to ${plural(this.maxSeats, "seat")} at a time.`);
        return;
      case "unauthenticated":
        this.hooks.onSessionEnded("Your shopping session has ended.");
        return;
      case "forbidden":
        flash(this.hooks.flashRegion, "warning", "You can't hold seats right now.", error.message);
        return;
      case "rate_limited":
        flash(
          this.hooks.flashRegion,
          "info",
          "Easy there!",
          `Too many tries at once; try again in ${res.retryAfter ?? 1} s.`,
        );
        return;
      case "network":
        flash(
          this.hooks.flashRegion,
          "warning",
          "We couldn't reach the box office.",
          "Check your connection and try again; nothing was held.",
        );
        return;
      default:
        flash(this.hooks.flashRegion, "warning", "Nothing was held.", `${error.message}. Please try again.`);
    }
  }

  /** Says which seats another fan got and offers the nearest free ones instead. */
  private tellLost(ids: string[]) {
    const suggestions = this.nearestFree(ids, Math.min(ids.length, this.maxSeats - this.selected.size));
    const title =
      ids.length === 1
        ? `Sorry, another fan just got seat ${ids[0]}.`
        : `Sorry, other fans just got seats ${listSeats(ids)}.`;
    const text =
      suggestions.length === 0
        ? "There are no free seats left near it in this section; try another section."
        : `The nearest free ${suggestions.length === 1 ? "seat is" : "seats are"} ${listSeats(suggestions)}.`;
    flash(
      this.hooks.flashRegion,
      "warning",
      title,
      text,
      suggestions.length === 0
        ? []
        : [{ label: `Pick ${listSeats(suggestions)} instead`, run: () => this.pickSuggested(suggestions) }],
    );
  }

  private pickSuggested(ids: string[]) {
    const taken = ids.filter((id) => this.statuses.get(id) !== "available");
    for (const id of ids) {
      if (taken.includes(id) || this.selected.size >= this.maxSeats) continue;
      this.selected.set(id, this.summary?.sections.find((s) => s.id === parseSeatId(id)?.section)?.price ?? 0);
      this.paintSeat(id);
    }
    this.renderSelection();
    if (taken.length > 0) {
      this.tellLost(taken);
    } else {
      flash(this.hooks.flashRegion, "success", `Picked ${listSeats(ids)}.`, "Hold them before someone else does.");
    }
    byId("map-hold").focus();
  }

  /** Free seats of the open section closest to the lost ones (same row first, then nearby rows). */
  private nearestFree(lost: string[], count: number): string[] {
    if (count <= 0) return [];
    const position = new Map<string, [number, number]>();
    for (const [r, row] of this.rows.entries()) {
      for (const [c, id] of row.entries()) position.set(id, [r, c]);
    }
    const anchors = lost.map((id) => position.get(id)).filter((p): p is [number, number] => p !== undefined);
    if (anchors.length === 0) return [];
    const candidates: { id: string; distance: number }[] = [];
    for (const [id, [r, c]] of position) {
      if (this.statuses.get(id) !== "available" || this.selected.has(id)) continue;
      const distance = Math.min(...anchors.map(([ar, ac]) => Math.abs(ar - r) * 3 + Math.abs(ac - c)));
      candidates.push({ id, distance });
    }
    candidates.sort((a, b) => a.distance - b.distance || compareLabels(a.id, b.id));
    return candidates.slice(0, count).map((c) => c.id);
  }
}
