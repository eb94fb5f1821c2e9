/**
 * The open section's seats as a grid of buttons: drawing each seat (never colour alone: number,
 * `H`, `×`, `✓` and a full label), the pointer (a click picks) and the keyboard (one Tab stop,
 * roving focus, arrows and Home/End through `stepInGrid`). State lives in the model.
 */
import { byId, h } from "./dom.js";
import { formatMoney } from "./format.js";
import type { SeatMapModel } from "./seatmap-model.js";
import { describeSeat, isGridKey, parseSeatId, STATUS_WORD, stepInGrid } from "./seats.js";
import type { SectionSummary } from "./types.js";

export class SeatGrid {
  private readonly buttons = new Map<string, HTMLButtonElement>();
  private focusedSeat: string | null = null;

  constructor(private readonly model: SeatMapModel) {
    byId("map-grid").addEventListener("keydown", (event) => this.onKey(event));
  }

  opening(section: SectionSummary, switching: boolean): void {
    byId("map-section").hidden = false;
    byId("map-section-title").textContent =
      `Section ${section.id} · ${section.tier} · ${formatMoney(section.price)} per seat`;
    if (switching) byId("map-grid").replaceChildren(h("p", { class: "muted" }, "Loading seats…"));
  }

  failed(message: string): void {
    byId("map-grid").replaceChildren(h("p", { class: "muted" }, `The seats did not load (${message}).`));
  }

  render(keepFocus: boolean): void {
    const grid = byId("map-grid");
    const hadFocus = keepFocus && grid.contains(document.activeElement);
    const rows = this.model.rows;
    this.buttons.clear();
    if (!this.focusedSeat || this.model.statusOf(this.focusedSeat) === undefined) {
      this.focusedSeat = rows[0]?.seats[0] ?? null;
    }
    grid.replaceChildren(
      ...rows.map((row) =>
        h(
          "div",
          { class: "seat-row" },
          h("span", { class: "row-label", "aria-hidden": "true" }, row.label),
          ...row.seats.map((id) => {
            const button = h("button", { type: "button", class: "seat", "data-seat": id, tabindex: -1 });
            button.addEventListener("click", () => this.model.toggle(id));
            button.addEventListener("focus", () => this.setRovingFocus(id));
            this.buttons.set(id, button);
            this.paint(id);
            return button;
          }),
        ),
      ),
    );
    if (this.focusedSeat) this.buttons.get(this.focusedSeat)?.setAttribute("tabindex", "0");
    if (hadFocus && this.focusedSeat) this.buttons.get(this.focusedSeat)?.focus();
  }

  paint(id: string): void {
    const button = this.buttons.get(id);
    if (!button) return;
    const status = this.model.statusOf(id) ?? "sold";
    const mine = this.model.isSelected(id);
    const ref = parseSeatId(id);
    button.dataset.status = status;
    button.classList.toggle("selected", mine);
    button.setAttribute("aria-pressed", String(mine));
    button.setAttribute("aria-disabled", String(status !== "available" && !mine));
    button.textContent = mine ? "✓" : status === "available" ? (ref?.number ?? "") : status === "held" ? "H" : "×";
    const price = this.model.priceOf(ref?.section);
    const word = mine ? "your pick" : STATUS_WORD[status];
    button.setAttribute(
      "aria-label",
      `${describeSeat(id)}, ${word}${status === "available" && price !== undefined ? `, ${formatMoney(price)}` : ""}`,
    );
    button.title = `Row ${ref?.row} seat ${ref?.number}: ${word}`;
  }

  private setRovingFocus(id: string) {
    if (this.focusedSeat && this.focusedSeat !== id) this.buttons.get(this.focusedSeat)?.setAttribute("tabindex", "-1");
    this.focusedSeat = id;
    this.buttons.get(id)?.setAttribute("tabindex", "0");
  }

  /** Arrow keys move between seats, Home/End to the ends of a row; one Tab stop for the grid. */
  private onKey(event: KeyboardEvent) {
    const from = this.focusedSeat;
    if (!from || !this.model.rows.some((r) => r.seats.includes(from)) || !isGridKey(event.key)) return;
    event.preventDefault();
    const next = stepInGrid(this.model.rows, from, event.key);
    if (next) {
      this.setRovingFocus(next);
      this.buttons.get(next)?.focus();
    }
  }
}
