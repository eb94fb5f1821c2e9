/**
 * The seat map's state, with no DOM: the summary and live section counts, the open section's
 * seat statuses, the fan's picks, the live stream (with its reconnect and the backlog of changes
 * that arrive while a section loads) and the hold request. Views (seatmap-tiers.ts,
 * seatmap-grid.ts) draw from it and are told what changed through `SeatMapObserver`.
 *
 * Live counts: a `seat` event says what a seat became, not what it was. For the open section the
 * previous status is known; elsewhere a seat that became held was available, one that became
 * available was held, one that became sold was held, which is how seats move. The summary is
 * re-read every half minute and whenever the stream reconnects, so any drift is short-lived.
 */
import { Observed } from "./observed.js";
import type { Api, ApiErrorBody } from "./api.js";
import { type Message, message, plural } from "./format.js";
import {
  compareLabels,
  describeSeat,
  expandCompact,
  isSeatStatus,
  layoutRows,
  listSeats,
  STATUS_WORD,
  type SeatRow,
  sectionOf,
} from "./seats.js";
import type { CompactSectionSeats, Hold, SeatMapSummary, SeatStatus, SectionSummary } from "./types.js";

export const RESYNC_MS = 30_000;

export type LiveState = "live" | "connecting" | "off";

/** The stream's three events; a browser's EventSource is the one the page uses. */
export interface StreamHandlers {
  ready(): void;
  seat(data: string): void;
  /** `closed`: the source gave up and will not reconnect by itself. */
  error(closed: boolean): void;
}
export type OpenStream = (url: string, on: StreamHandlers) => { close(): void };

/** What a view hears from the model; each call names what to repaint. */
export interface SeatMapObserver {
  live(state: LiveState): void;
  summaryLoaded(): void;
  sectionCount(sectionId: string): void;
  sectionOpening(section: SectionSummary, switching: boolean): void;
  sectionFailed(message: string): void;
  /** The open section's seats were (re)read; `focusTitle` when the fan just switched to it. */
  sectionLoaded(keepFocus: boolean, focusTitle: boolean): void;
  seat(id: string): void;
  selection(): void;
  message(m: Message): void;
  /** Another fan got these picks; `suggestions` are the nearest free seats to offer instead. */
  lost(ids: string[], suggestions: string[]): void;
}

export interface SeatMapDeps {
  api: Pick<Api, "call" | "url">;
  eventId: string;
  openStream: OpenStream;
  accessToken(): string | undefined;
  onHeld(hold: Hold): void;
  onSessionEnded(reason: string): void;
}

/** Where "best available" looks: anywhere, one tier, or one section. */
export type BestWhere = { tier: string } | { section: string } | { tier?: undefined; section?: undefined };

export type HoldRequest =
  | { seats: string[] }
  | { generalAdmission: { id: string; quantity: number } }
  | { best: { quantity: number; splitRows?: boolean } & BestWhere };

const SESSION_ENDED = "Your shopping session has ended.";

export class SeatMapModel extends Observed<SeatMapObserver> {
  summary: SeatMapSummary | null = null;
  openSectionId: string | null = null;
  /** The open section laid out in rows (the grid, the keyboard and the nearest free seat use it). */
  rows: SeatRow[] = [];
  holding = false;
  private readonly available = new Map<string, number>();
  private readonly areaAvailable = new Map<string, number>();
  private readonly statuses = new Map<string, SeatStatus>();
  /** Picks, with the price of each. */
  private readonly selected = new Map<string, number>();
  /** Seats of a hold request not answered yet: their change to `held` may be ours. */
  private readonly inFlight = new Set<string>();
  /** Seat events that arrived while the open section was loading. */
  private buffered: { id: string; status: SeatStatus }[] | null = null;
  private loadingSeq = 0;
  private stream: { close(): void } | null = null;
  private wasReady = false;
  private resyncTimer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly deps: SeatMapDeps) {
    super();
  }

  get maxSeats(): number {
    return this.summary?.maxSeatsPerFan ?? 8;
  }

  statusOf(id: string): SeatStatus | undefined {
    return this.statuses.get(id);
  }

  isSelected(id: string): boolean {
    return this.selected.has(id);
  }

  get selectedIds(): string[] {
    return [...this.selected.keys()];
  }

  get selectedTotal(): number {
    return [...this.selected.values()].reduce((a, b) => a + b, 0);
  }

  priceOf(sectionId: string | undefined): number | undefined {
    return this.summary?.sections.find((s) => s.id === sectionId)?.price;
  }

  /** Seats left in a section, by the live count (the summary's until the stream says more). */
  availableIn(section: SectionSummary): number {
    return this.available.get(section.id) ?? section.available;
  }

  availableInArea(areaId: string, fallback: number): number {
    return this.areaAvailable.get(areaId) ?? fallback;
  }

  async open(): Promise<void> {
    this.connect();
    await this.loadSummary();
    if (this.openSectionId) await this.openSection(this.openSectionId);
    clearInterval(this.resyncTimer);
    this.resyncTimer = setInterval(() => void this.resync(), RESYNC_MS);
  }

  close(): void {
    this.stream?.close();
    this.stream = null;
    this.wasReady = false;
    clearInterval(this.resyncTimer);
    this.resyncTimer = undefined;
    this.view.live("off");
  }

  /** Forgets the selection (after a hold, or when the session ends). */
  clearSelection(): void {
    const ids = this.selectedIds;
    this.selected.clear();
    for (const id of ids) this.view.seat(id);
    this.view.selection();
  }

  async resync(): Promise<void> {
    await this.loadSummary();
    if (this.openSectionId) await this.openSection(this.openSectionId, { keepFocus: true });
  }

  // --- live updates -------------------------------------------------------------------------

  private connect() {
    if (this.stream) return;
    this.view.live("connecting");
    this.stream = this.deps.openStream(this.path("/seatmap/stream", true), {
      ready: () => {
        this.view.live("live");
        // After a reconnect, changes may have been missed: read the truth again.
        if (this.wasReady) void this.resync();
        this.wasReady = true;
      },
      seat: (data) => this.onSeatEvent(data),
      error: (closed) => this.view.live(closed ? "off" : "connecting"),
    });
  }

  private onSeatEvent(data: string) {
    let change: { id?: unknown; status?: unknown };
    try {
      change = JSON.parse(data) as typeof change;
    } catch {
      return; // a malformed event changes nothing
    }
    if (typeof change?.id === "string" && isSeatStatus(change.status)) this.onSeatChange(change.id, change.status);
  }

  private onSeatChange(id: string, status: SeatStatus) {
    const section = sectionOf(id);
    if (!section) return;
    if (this.buffered && section === this.openSectionId) this.buffered.push({ id, status });

    if (section === this.openSectionId && this.statuses.has(id)) {
      this.setStatus(id, status);
    } else {
      // Not on screen: infer what it was from how seats move.
      this.adjustAvailable(section, status === "held" ? -1 : status === "available" ? 1 : 0);
    }
    if (status !== "available" && this.selected.has(id) && !this.inFlight.has(id)) {
      this.selected.delete(id);
      this.view.seat(id);
      this.view.selection();
      this.tellLost([id]);
    }
  }

  /** A seat of the open section changed: repaint it and keep its section's count exact. */
  private setStatus(id: string, status: SeatStatus) {
    const previous = this.statuses.get(id);
    if (previous === status) return;
    this.statuses.set(id, status);
    const section = sectionOf(id);
    if (section && previous !== undefined) {
      this.adjustAvailable(section, Number(status === "available") - Number(previous === "available"));
    }
    this.view.seat(id);
  }

  private adjustAvailable(sectionId: string, delta: number) {
    const count = this.available.get(sectionId);
    if (count === undefined || delta === 0) return;
    this.available.set(sectionId, Math.max(0, count + delta));
    this.view.sectionCount(sectionId);
  }

  // --- summary and sections ---------------------------------------------------------------

  async loadSummary(): Promise<void> {
    const res = await this.deps.api.call<SeatMapSummary>("GET", this.path("/seatmap"));
    if (!res.ok) {
      if (!this.summary) {
        this.view.message(
          message("warning", "The seat map did not load.", res.error.message, [
            { label: "Try again", run: () => void this.loadSummary() },
          ]),
        );
      }
      return;
    }
    this.summary = res.body;
    for (const s of res.body.sections) this.available.set(s.id, s.available);
    for (const a of res.body.generalAdmission) this.areaAvailable.set(a.id, a.available);
    this.view.summaryLoaded();
  }

  async openSection(sectionId: string, options: { keepFocus?: boolean } = {}): Promise<void> {
    const section = this.summary?.sections.find((s) => s.id === sectionId);
    if (!section) return;
    const switching = this.openSectionId !== sectionId;
    this.openSectionId = sectionId;
    const seq = ++this.loadingSeq;
    this.buffered = [];
    this.view.sectionOpening(section, switching);

    const res = await this.deps.api.call<CompactSectionSeats>(
      "GET",
      this.path(`/sections/${encodeURIComponent(sectionId)}/seats?format=compact`),
    );
    if (seq !== this.loadingSeq) return; // another section was opened meanwhile
    if (!res.ok) {
      this.buffered = null;
      this.view.sectionFailed(res.error.message);
      return;
    }
    this.statuses.clear();
    for (const seat of expandCompact(res.body)) this.statuses.set(seat.id, seat.status);
    for (const change of this.buffered ?? []) this.statuses.set(change.id, change.status);
    this.buffered = null;
    let left = 0;
    for (const status of this.statuses.values()) if (status === "available") left++;
    this.available.set(sectionId, left);
    this.view.sectionCount(sectionId);
    // Seats picked earlier that another fan took while we were not looking.
    const gone = this.selectedIds.filter((id) => sectionOf(id) === sectionId && this.statuses.get(id) !== "available");
    for (const id of gone) this.selected.delete(id);
    this.rows = layoutRows(this.statuses.keys());
    this.view.sectionLoaded(options.keepFocus === true, switching && !options.keepFocus);
    this.view.selection();
    if (gone.length > 0) this.tellLost(gone);
  }

  // --- picks -------------------------------------------------------------------------------

  toggle(id: string): void {
    if (this.holding) return;
    if (this.selected.has(id)) {
      this.selected.delete(id);
    } else {
      const status = this.statuses.get(id);
      if (status !== "available") {
        this.view.message(
          message("info", `${describeSeat(id)} is ${STATUS_WORD[status ?? "sold"]}.`, "Pick a green seat."),
        );
        return;
      }
      if (this.selected.size >= this.maxSeats) {
        this.view.message(
          message("info", `You can pick up to ${plural(this.maxSeats, "seat")}.`, "Unpick one to choose another."),
        );
        return;
      }
      this.selected.set(id, this.priceOf(sectionOf(id)) ?? 0);
    }
    this.view.seat(id);
    this.view.selection();
  }

  /** Picks the seats offered after a loss, those still free and within the limit. */
  pickSuggested(ids: string[]): void {
    const taken = ids.filter((id) => this.statuses.get(id) !== "available");
    for (const id of ids) {
      if (taken.includes(id) || this.selected.size >= this.maxSeats) continue;
      this.selected.set(id, this.priceOf(sectionOf(id)) ?? 0);
      this.view.seat(id);
    }
    this.view.selection();
    if (taken.length > 0) this.tellLost(taken);
    else this.view.message(message("success", `Picked ${listSeats(ids)}.`, "Hold them before someone else does."));
  }

  private tellLost(ids: string[]) {
    this.view.lost(ids, this.nearestFree(ids, Math.min(ids.length, this.maxSeats - this.selected.size)));
  }

  /** Free seats of the open section closest to the lost ones (same row first, then nearby rows). */
  nearestFree(lost: string[], count: number): string[] {
    if (count <= 0) return [];
    const position = new Map<string, [number, number]>();
    for (const [r, row] of this.rows.entries()) {
      for (const [c, id] of row.seats.entries()) position.set(id, [r, c]);
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

  // --- holds -------------------------------------------------------------------------------

  async holdSelected(): Promise<void> {
    const seats = this.selectedIds;
    if (seats.length === 0 || this.holding) return;
    await this.requestHold({ seats });
  }

  async holdArea(areaId: string, quantity: number): Promise<void> {
    if (!Number.isInteger(quantity) || quantity < 1) {
      this.view.message(message("info", "Choose how many standing places you want (at least 1)."));
      return;
    }
    if (quantity > this.maxSeats) {
      this.view.message(message("info", `You can hold up to ${plural(this.maxSeats, "place")}.`));
      return;
    }
    await this.requestHold({ generalAdmission: { id: areaId, quantity } });
  }

  /**
   * Asks the gateway for the best `quantity` seats together (one row; two adjacent rows only
   * when `splitRows`). The gateway picks and DynamoDB decides, so nothing is picked here.
   */
  async holdBest(quantity: number, where: BestWhere, splitRows = false): Promise<void> {
    if (this.holding) return;
    if (!Number.isInteger(quantity) || quantity < 1) {
      this.view.message(message("info", "Choose how many seats you want together (at least 1)."));
      return;
    }
    if (quantity > this.maxSeats) {
      this.view.message(message("info", `You can hold up to ${plural(this.maxSeats, "seat")}.`));
      return;
    }
    await this.requestHold({ best: { quantity, ...where, ...(splitRows ? { splitRows } : {}) } });
  }

  private async requestHold(body: HoldRequest): Promise<void> {
    const token = this.deps.accessToken();
    if (!token) {
      this.deps.onSessionEnded(SESSION_ENDED);
      return;
    }
    const seats = "seats" in body ? body.seats : [];
    this.holding = true;
    for (const id of seats) this.inFlight.add(id);
    this.view.selection();
    const res = await this.deps.api.call<Hold>("POST", this.path("/holds"), { token, json: body });
    this.holding = false;
    for (const id of seats) this.inFlight.delete(id);
    this.view.selection();
    if (res.ok) this.deps.onHeld(res.body);
    else this.holdRefused(res.error, res.retryAfter);
  }

  private holdRefused(error: ApiErrorBody, retryAfter: number | null) {
    switch (error.code) {
      case "seat_unavailable":
        return this.holdLostRace(error);
      case "no_block_available":
        return this.noBlock(error);
      case "unauthenticated":
        return this.deps.onSessionEnded(SESSION_ENDED);
      case "seat_limit_exceeded":
        return this.view.message(message("info", `You can hold up to ${plural(this.maxSeats, "seat")} at a time.`));
      case "forbidden":
        return this.view.message(message("warning", "You can't hold seats right now.", error.message));
      case "rate_limited":
        return this.view.message(
          message("info", "Easy there!", `Too many tries at once; try again in ${retryAfter ?? 1} s.`),
        );
      case "network":
        return this.view.message(
          message(
            "warning",
            "We couldn't reach the box office.",
            "Check your connection and try again; nothing was held.",
          ),
        );
      default:
        return this.view.message(message("warning", "Nothing was held.", `${error.message}. Please try again.`));
    }
  }

  /** No seats together were left where the fan asked (or other fans got every block tried). */
  private noBlock(error: ApiErrorBody) {
    const left = typeof error.details?.available === "number" ? error.details.available : null;
    this.view.message(
      message(
        "warning",
        "No seats together there right now.",
        left
          ? `${plural(left, "seat")} left there, but not side by side. Try fewer seats, seats over two rows, or another tier.`
          : "Try another tier or section.",
      ),
    );
    void this.loadSummary();
  }

  /** Another fan got there first: seats it names are marked, standing places re-read. */
  private holdLostRace(error: ApiErrorBody) {
    const lost = Array.isArray(error.details?.seats)
      ? (error.details.seats as unknown[]).filter((s): s is string => typeof s === "string")
      : [];
    if (lost.length > 0) {
      for (const id of lost) {
        this.selected.delete(id);
        // The stream will say held or sold; until then it is not available, that much is sure.
        if (this.statuses.get(id) === "available") this.setStatus(id, "held");
        else this.view.seat(id);
      }
      this.view.selection();
      this.tellLost(lost);
      return;
    }
    const left = typeof error.details?.available === "number" ? error.details.available : null;
    this.view.message(
      message(
        "warning",
        left === null ? "Those places just went." : `Only ${plural(left, "place")} left there now.`,
        left ? "Try a smaller number." : "Try another area or section.",
      ),
    );
    void this.loadSummary();
  }

  private path(rest: string, absolute = false): string {
    const path = `/v1/events/${encodeURIComponent(this.deps.eventId)}${rest}`;
    return absolute ? this.deps.api.url(path) : path;
  }
}
