/**
 * "Tell me when seats come back": on a sold-out map the fan leaves a contact (a mail address
 * here; the operator's system maps it to mail or push) and is told, in the order fans asked, when
 * holds lapse or are released. Shown only while nothing is left, and only when the gateway has
 * the webhook wired (a 404 notify_disabled keeps it hidden for good).
 */
import type { Api } from "./api.js";
import { byId } from "./dom.js";
import type { SeatMapModel } from "./seatmap-model.js";

interface NotifyView {
  requested: boolean;
  state?: "waiting" | "claimed" | "notified";
}

export interface NotifyHooks {
  api: Api;
  eventId: string;
  accessToken(): string | undefined;
}

export class NotifyPanel {
  private readonly panel = byId("map-notify");
  private readonly form = byId<HTMLFormElement>("notify-form");
  private readonly contact = byId<HTMLInputElement>("notify-contact");
  private readonly button = byId<HTMLButtonElement>("notify-ask");
  private readonly cancel = byId<HTMLButtonElement>("notify-cancel");
  private readonly status = byId("notify-status");
  /** null: not asked yet; false: the gateway has it off. */
  private enabled: boolean | null = null;
  private requested = false;
  private busy = false;

  constructor(
    private readonly model: SeatMapModel,
    private readonly hooks: NotifyHooks,
  ) {
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      void this.ask();
    });
    this.cancel.addEventListener("click", () => void this.withdraw());
  }

  private get soldOut(): boolean {
    const summary = this.model.summary;
    if (!summary) return false;
    const seats = summary.sections.reduce((n, s) => n + this.model.availableIn(s), 0);
    const places = summary.generalAdmission.reduce((n, a) => n + this.model.availableInArea(a.id, a.available), 0);
    return seats + places === 0;
  }

  private path(): string {
    return `/v1/events/${encodeURIComponent(this.hooks.eventId)}/notify`;
  }

  /** Counts changed: shown while sold out (and once asked, while the fan's request stands). */
  render(): void {
    // Asked once per page: a fan who asked before a reload finds the request (and its answer).
    if (this.enabled === null) void this.load();
    const show = this.enabled !== false && (this.soldOut || this.requested);
    this.panel.hidden = !show;
    this.paint();
  }

  private paint(): void {
    this.form.hidden = this.requested;
    this.cancel.hidden = !this.requested;
    this.button.disabled = this.busy;
    this.cancel.disabled = this.busy;
    this.button.textContent = this.busy ? "Asking…" : "Tell me when seats come back";
  }

  private async load(): Promise<void> {
    this.enabled = true;
    const res = await this.hooks.api.call<NotifyView>("GET", this.path(), { token: this.hooks.accessToken() });
    if (!res.ok) {
      if (res.error.code === "notify_disabled") {
        this.enabled = false;
        this.panel.hidden = true;
      }
      return;
    }
    this.requested = res.body.requested;
    if (res.body.requested) this.say(res.body.state === "notified" ? "We told you: seats came back." : undefined);
    this.render();
  }

  private say(text?: string): void {
    this.status.textContent =
      text ??
      (this.requested ? "You're on the list: we'll tell you when seats come back, in the order fans asked." : "");
  }

  private async ask(): Promise<void> {
    const contact = this.contact.value.trim();
    if (!contact) {
      this.status.textContent = "Give us an address to tell you at.";
      this.contact.focus();
      return;
    }
    this.busy = true;
    this.paint();
    const res = await this.hooks.api.call<NotifyView>("POST", this.path(), {
      token: this.hooks.accessToken(),
      json: { contact },
    });
    this.busy = false;
    if (res.ok) {
      this.requested = true;
      this.say();
    } else if (res.error.code === "not_sold_out") {
      this.status.textContent = "Seats just came back: pick them now.";
    } else {
      this.status.textContent = `That didn't work: ${res.error.message}`;
    }
    this.render();
  }

  private async withdraw(): Promise<void> {
    this.busy = true;
    this.paint();
    const res = await this.hooks.api.call("DELETE", this.path(), { token: this.hooks.accessToken() });
    this.busy = false;
    if (res.ok) {
      this.requested = false;
      this.status.textContent = "Cancelled: we won't tell you.";
    }
    this.render();
  }
}
