/**
 * "Best available": the fan says how many seats and where (anywhere, a tier, a section), and
 * the gateway picks the best block together and holds it in one step. The choices follow the
 * summary (its tiers and sections, the fan's seat limit); the hold goes through the model.
 */
import { byId, h } from "./dom.js";
import { formatMoney } from "./format.js";
import type { BestWhere, SeatMapModel } from "./seatmap-model.js";

export class BestPanel {
  private readonly quantity = byId<HTMLSelectElement>("best-quantity");
  private readonly where = byId<HTMLSelectElement>("best-where");
  private readonly split = byId<HTMLInputElement>("best-split");
  private readonly button = byId<HTMLButtonElement>("best-hold");

  constructor(private readonly model: SeatMapModel) {
    this.button.addEventListener("click", () => void this.hold());
  }

  /** The summary was (re)read: the quantities up to the limit, the tiers and sections. */
  render(): void {
    const summary = this.model.summary;
    const panel = byId("map-best");
    if (!summary || summary.sections.length === 0) {
      panel.hidden = true;
      return;
    }
    panel.hidden = false;
    const keepQuantity = this.quantity.value || "2";
    const keepWhere = this.where.value;
    this.quantity.replaceChildren(
      ...Array.from({ length: this.model.maxSeats }, (_, i) => h("option", { value: i + 1 }, String(i + 1))),
    );
    this.quantity.value = Number(keepQuantity) <= this.model.maxSeats ? keepQuantity : "1";

    const tiers = new Map<string, number[]>();
    for (const s of summary.sections) {
      const prices = tiers.get(s.tier) ?? [];
      prices.push(s.price);
      tiers.set(s.tier, prices);
    }
    const options = [h("option", { value: "" }, "Anywhere")];
    for (const [tier, prices] of tiers) {
      options.push(h("option", { value: `tier:${tier}` }, `${tier} · from ${formatMoney(Math.min(...prices))}`));
    }
    for (const s of summary.sections) {
      options.push(h("option", { value: `section:${s.id}` }, `Section ${s.id} · ${formatMoney(s.price)}`));
    }
    this.where.replaceChildren(...options);
    if ([...this.where.options].some((o) => o.value === keepWhere)) this.where.value = keepWhere;
  }

  /** Disabled while any hold is in flight, like the selection bar. */
  renderBusy(): void {
    this.button.disabled = this.model.holding;
    this.button.textContent = this.model.holding ? "Holding…" : "Find and hold the best seats";
  }

  private hold(): Promise<void> {
    const [kind, value] = splitOnce(this.where.value);
    const where: BestWhere = kind === "tier" ? { tier: value } : kind === "section" ? { section: value } : {};
    return this.model.holdBest(Number(this.quantity.value), where, this.split.checked);
  }
}

function splitOnce(v: string): [string, string] {
  const at = v.indexOf(":");
  return at < 0 ? ["", ""] : [v.slice(0, at), v.slice(at + 1)];
}
