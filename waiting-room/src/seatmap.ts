/**
 * The seat map on the fan's page: sections grouped by tier with a live availability meter, one
 * section's seats as a grid that follows the Server-Sent Events stream, seat picking within
 * `maxSeatsPerFan`, and the hold request (with the nearest free seats offered when another fan
 * won the race). This file puts the pieces together: the model (seatmap-model.ts: state, the
 * stream, the hold), the tier cards and the grid (their own views), and draws what is left, the
 * live indicator, the selection bar and the messages. "Best available" (seatmap-best.ts) holds
 * seats the gateway picks.
 */
import type { Api } from "./api.js";
import { byId, showMessage } from "./dom.js";
import { formatMoney, type Message, message, plural } from "./format.js";
import { BestPanel } from "./seatmap-best.js";
import { SeatGrid } from "./seatmap-grid.js";
import { type LiveState, type OpenStream, SeatMapModel, type SeatMapObserver } from "./seatmap-model.js";
import { NotifyPanel } from "./seatmap-notify.js";
import { TierCards } from "./seatmap-tiers.js";
import { listSeats } from "./seats.js";
import type { Hold } from "./types.js";

export interface SeatMapHooks {
  api: Api;
  eventId: string;
  /** The region messages go to. */
  flashRegion: string;
  accessToken(): string | undefined;
  onHeld(hold: Hold): void;
  onSessionEnded(reason: string): void;
}

/** The browser's EventSource as the model's stream. */
const eventSourceStream: OpenStream = (url, on) => {
  const source = new EventSource(url);
  source.addEventListener("ready", () => on.ready());
  source.addEventListener("seat", (event) => on.seat((event as MessageEvent<string>).data));
  source.addEventListener("error", () => on.error(source.readyState === EventSource.CLOSED));
  return source;
};

const LIVE_TEXT: Record<LiveState, string> = {
  live: "Live: seats update as other fans choose",
  connecting: "Reconnecting to live updates…",
  off: "Live updates off",
};

export class SeatMap {
  private readonly model: SeatMapModel;
  private readonly tiers: TierCards;
  private readonly grid: SeatGrid;
  private readonly best: BestPanel;
  private readonly notify: NotifyPanel;

  constructor(private readonly hooks: SeatMapHooks) {
    this.model = new SeatMapModel({ ...hooks, openStream: eventSourceStream });
    this.tiers = new TierCards(this.model);
    this.grid = new SeatGrid(this.model);
    this.best = new BestPanel(this.model);
    this.notify = new NotifyPanel(this.model, hooks);
    this.model.observe(this.observer());
    byId("map-hold").addEventListener("click", () => void this.model.holdSelected());
    byId("map-clear").addEventListener("click", () => this.model.clearSelection());
  }

  get eventName(): string | undefined {
    return this.model.summary?.name;
  }

  open(): Promise<void> {
    return this.model.open();
  }

  close(): void {
    this.model.close();
  }

  clearSelection(): void {
    this.model.clearSelection();
  }

  private observer(): SeatMapObserver {
    const say = (m: Message) => showMessage(this.hooks.flashRegion, m);
    return {
      live: (state) => {
        const el = byId("map-live");
        el.dataset.state = state;
        el.textContent = LIVE_TEXT[state];
      },
      summaryLoaded: () => {
        this.tiers.render();
        this.best.render();
        this.notify.render();
        this.renderSelection();
      },
      sectionCount: (id) => {
        this.tiers.paintSection(id);
        this.notify.render();
      },
      sectionOpening: (section, switching) => {
        this.tiers.paintSections();
        this.grid.opening(section, switching);
      },
      sectionFailed: (message) => this.grid.failed(message),
      sectionLoaded: (keepFocus, focusTitle) => {
        this.grid.render(keepFocus);
        if (focusTitle) byId("map-section-title").focus();
      },
      seat: (id) => this.grid.paint(id),
      selection: () => this.renderSelection(),
      message: say,
      lost: (ids, suggestions) => say(this.lostMessage(ids, suggestions)),
    };
  }

  /** Says which seats another fan got and offers the nearest free ones instead. */
  private lostMessage(ids: string[], suggestions: string[]): Message {
    const title =
      ids.length === 1
        ? `Sorry, another fan just got seat ${ids[0]}.`
        : `Sorry, other fans just got seats ${listSeats(ids)}.`;
    if (suggestions.length === 0) {
      return message("warning", title, "There are no free seats left near it in this section; try another section.");
    }
    const pick = () => {
      this.model.pickSuggested(suggestions);
      byId("map-hold").focus();
    };
    return message(
      "warning",
      title,
      `The nearest free ${suggestions.length === 1 ? "seat is" : "seats are"} ${listSeats(suggestions)}.`,
      [{ label: `Pick ${listSeats(suggestions)} instead`, run: pick }],
    );
  }

  private renderSelection() {
    const ids = this.model.selectedIds;
    const holding = this.model.holding;
    const hold = byId<HTMLButtonElement>("map-hold");
    // The bar follows the fan down the page only when there is something to hold.
    byId("map-selection").dataset.empty = String(ids.length === 0);
    byId("map-selection-text").textContent =
      ids.length === 0
        ? "No seats picked yet."
        : `${plural(ids.length, "seat")}: ${ids.join(", ")} · ${formatMoney(this.model.selectedTotal)}`;
    hold.disabled = ids.length === 0 || holding;
    hold.textContent = holding ? "Holding…" : ids.length > 1 ? `Hold these ${ids.length} seats` : "Hold this seat";
    byId<HTMLButtonElement>("map-clear").disabled = ids.length === 0 || holding;
    this.best.renderBusy();
  }
}
