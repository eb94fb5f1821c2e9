/**
 * The seat map's tiers: a card per section (opens it) and per standing area (holds places), each
 * with an availability meter. Draws from the model; clicks go back to it.
 */
import { byId, h } from "./dom.js";
import { formatMoney, plural } from "./format.js";
import type { SeatMapModel } from "./seatmap-model.js";
import type { AreaSummary, SectionSummary } from "./types.js";

interface Card {
  button: HTMLButtonElement;
  fill: HTMLElement;
  count: HTMLElement;
}

function paintMeter(card: Card, left: number, total: number) {
  const share = total > 0 ? left / total : 0;
  card.fill.style.width = `${Math.round(share * 100)}%`;
  card.fill.dataset.level = share === 0 ? "none" : share < 0.15 ? "low" : "ok";
  card.count.textContent = left === 0 ? "Sold out" : `${left.toLocaleString()} of ${total.toLocaleString()} left`;
}

export class TierCards {
  private readonly sections = new Map<string, Card>();
  private readonly areas = new Map<string, Card>();

  constructor(private readonly model: SeatMapModel) {}

  /** The summary was (re)read: the limit line and every card again. */
  render(): void {
    const summary = this.model.summary;
    if (!summary) return;
    byId("map-limit").textContent =
      `Pick up to ${plural(this.model.maxSeats, "seat")}. Seats are yours once held; you then have ${
        summary.holdSeconds ? `${Math.round(summary.holdSeconds / 60)} minutes` : "a few minutes"
      } to pay.`;
    const byTier = new Map<string, { sections: SectionSummary[]; areas: AreaSummary[] }>();
    const tierOf = (tier: string) => {
      let entry = byTier.get(tier);
      if (!entry) {
        entry = { sections: [], areas: [] };
        byTier.set(tier, entry);
      }
      return entry;
    };
    for (const s of summary.sections) tierOf(s.tier).sections.push(s);
    for (const a of summary.generalAdmission) tierOf(a.tier).areas.push(a);

    this.sections.clear();
    this.areas.clear();
    byId("map-tiers").replaceChildren(
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
    this.paintSections();
    for (const id of this.areas.keys()) this.paintArea(id);
  }

  paintSections(): void {
    for (const id of this.sections.keys()) this.paintSection(id);
  }

  paintSection(sectionId: string): void {
    const card = this.sections.get(sectionId);
    const section = this.model.summary?.sections.find((s) => s.id === sectionId);
    if (!card || !section) return;
    paintMeter(card, this.model.availableIn(section), section.total);
    card.button.setAttribute("aria-pressed", String(this.model.openSectionId === sectionId));
  }

  private paintArea(areaId: string) {
    const card = this.areas.get(areaId);
    const area = this.model.summary?.generalAdmission.find((a) => a.id === areaId);
    if (!card || !area) return;
    const left = this.model.availableInArea(areaId, area.available);
    paintMeter(card, left, area.capacity);
    card.button.toggleAttribute("disabled", left === 0);
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
        "aria-pressed": String(this.model.openSectionId === s.id),
        "aria-controls": "map-section",
        onclick: () => void this.model.openSection(s.id),
      },
      h("span", { class: "card-name" }, `Section ${s.id}`),
      h("span", { class: "card-price" }, `${formatMoney(s.price)} per seat`),
      h("span", { class: "meter", "aria-hidden": "true" }, fill),
      count,
    );
    this.sections.set(s.id, { button, fill, count });
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
      max: this.model.maxSeats,
      value: 1,
      inputmode: "numeric",
      class: "qty",
    });
    const button = h(
      "button",
      {
        type: "button",
        class: "secondary",
        onclick: () => void this.model.holdArea(a.id, Number(quantity.value)),
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
    this.areas.set(a.id, { button, fill, count });
    return card;
  }
}
