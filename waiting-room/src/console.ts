/**
 * The operator console: charts of the line and the sale over the last hour (the gateway's history,
 * loaded on connect, then this console's stats polls and the gateway's /metrics), admission
 * controls with a confirmation step, and seat counts by section.
 * The operator token is typed into the page and kept in sessionStorage (this tab only).
 *
 * The state, the poll and the settings rules are in console-model.ts (the loop's bounds in
 * console-bounds.ts); the loop's section is drawn by console-loop.ts, the sale controls by
 * console-operator.ts; this file draws the rest and wires the forms, the dialog and the storage.
 */
import { Api } from "./api.js";
import { LoopChart, Sparkline, spanText } from "./chart.js";
import { apiBase, apiIsElsewhere, DEFAULT_EVENT_ID, eventIdFromUrl, isEventId } from "./config.js";
import {
  type Change,
  type ChartHistory,
  type ChartName,
  ConsoleModel,
  type ConsoleView,
  type Rates,
  type RoomStatus,
  rate,
} from "./console-model.js";
import { initLoopControls } from "./console-loop.js";
import { initSaleControls } from "./console-operator.js";
import { byId, clearFlash, flash, h, setText, showMessage } from "./dom.js";
import { operatorToken, rememberOperatorToken } from "./storage.js";
import type { Stats, WaitingRoomSettings } from "./types.js";

const FLASH = "flash";
const api = new Api(apiBase());
const model = new ConsoleModel(api, { eventId: eventIdFromUrl() ?? DEFAULT_EVENT_ID, token: operatorToken() });

const charts: Record<ChartName, { title: string; unit: string; chart: Sparkline }> = {
  waiting: { title: "Queue depth", unit: "fans waiting", chart: new Sparkline("Queue depth") },
  admissions: {
    title: "Admissions / s",
    unit: "fans let in per second (5 s average)",
    chart: new Sparkline("Admissions per second", rate),
  },
  active: { title: "Active sessions", unit: "fans shopping", chart: new Sparkline("Active sessions") },
  holds: { title: "Seats held", unit: "seats and places in holds", chart: new Sparkline("Seats held") },
  sales: {
    title: "Sales / s",
    unit: "seats and places sold per second (5 s average)",
    chart: new Sparkline("Seats sold per second", rate),
  },
  conflicts: {
    title: "Conflicts / s",
    unit: "holds lost to another fan (5 s average; this gateway, all events; since this page opened)",
    chart: new Sparkline("Conflicts per second", rate),
  },
};
const loopChart = new LoopChart("Admission loop");
byId("loop-figure").append(loopChart.scales, loopChart.element);

const RATE_CHARTS: ReadonlySet<ChartName> = new Set(["admissions", "sales", "conflicts"]);
const readouts = new Map<ChartName, HTMLElement>();

function renderCharts() {
  byId("charts").replaceChildren(
    ...(Object.keys(charts) as ChartName[]).map((name) => {
      const c = charts[name];
      const value = h("span", { class: "chart-value", "data-chart": name }, "–");
      readouts.set(name, value);
      return h(
        "figure",
        { class: "chart" },
        h(
          "figcaption",
          {},
          h("span", { class: "chart-title" }, c.title),
          value,
          h("span", { class: "chart-unit" }, c.unit),
        ),
        c.chart.element,
      );
    }),
  );
}

/** The readout beside a chart: the latest poll's figure. */
function readout(name: ChartName, value: number) {
  const el = readouts.get(name);
  if (el) el.textContent = RATE_CHARTS.has(name) ? rate(value) : value.toLocaleString();
}

function renderRoom(stats: Stats, room: RoomStatus) {
  setText("dash-state", room.label);
  byId("dash-state").dataset.state = room.state;
  setText(
    "dash-summary",
    `${stats.admitted.toLocaleString()} admitted so far · ${stats.active.toLocaleString()} shopping now · ` +
      `${stats.purchases.confirmed.toLocaleString()} purchases confirmed, ${stats.purchases.pending.toLocaleString()} pending, ` +
      `${stats.purchases.failed.toLocaleString()} failed`,
  );
  setText("settings-in-force", room.inForce);
  const rateInput = byId<HTMLInputElement>("settings-rate");
  const admitPerSecond = model.inForce.admitPerSecond;
  if (rateInput.dataset.dirty !== "true" && document.activeElement !== rateInput && admitPerSecond !== undefined) {
    rateInput.value = String(admitPerSecond);
  }
  const pause = byId<HTMLButtonElement>("settings-pause");
  pause.textContent = room.paused ? "Resume admission…" : "Pause admission…";
  pause.dataset.action = room.paused ? "resume" : "pause";
}

function renderSections(stats: Stats) {
  // Counted at most once per 5 s for every console together (a shared snapshot): say when.
  const countedAt = stats.counts ? new Date(stats.counts.at) : null;
  setText(
    "sections-asof",
    countedAt && Number.isFinite(countedAt.getTime())
      ? `From the authoritative store, as of ${countedAt.toLocaleTimeString()}.`
      : "From the authoritative store.",
  );
  const rows = [
    ...(stats.sections ?? []).map((s) => ({ name: `Section ${s.id}`, ...s })),
    ...Object.entries(stats.generalAdmission).map(([id, g]) => ({
      name: `Standing ${id}`,
      available: g.available,
      held: g.held ?? 0,
      sold: g.sold,
      total: g.capacity ?? g.available + (g.held ?? 0) + g.sold,
    })),
  ];
  const cell = (n: number) => h("td", { class: "num" }, n.toLocaleString());
  byId("sections-body").replaceChildren(
    ...rows.map((r) => {
      const bar = h("span", { class: "stack-bar", "aria-hidden": "true" });
      for (const part of ["sold", "held", "available"] as const) {
        const seg = h("span", { class: `seg seg-${part}` });
        seg.style.width = `${r.total > 0 ? (r[part] / r.total) * 100 : 0}%`;
        bar.append(seg);
      }
      return h(
        "tr",
        {},
        h("th", { scope: "row" }, r.name),
        cell(r.available),
        cell(r.held),
        cell(r.sold),
        cell(r.total),
        h("td", {}, bar),
      );
    }),
  );
  const t = stats.seats;
  byId("sections-foot").replaceChildren(
    h(
      "tr",
      {},
      h("th", { scope: "row" }, "All seats"),
      cell(t.available),
      cell(t.held),
      cell(t.sold),
      cell(t.total ?? t.available + t.held + t.sold),
      h("td"),
    ),
  );
}

const view: ConsoleView = {
  connected(eventId) {
    byId("connect").hidden = true;
    byId("dash").hidden = false;
    setText("dash-event", eventId);
    void sale.refresh();
  },
  ready: () => byId("dash-title").focus(),
  disconnected() {
    byId("dash").hidden = true;
    byId("connect").hidden = false;
  },
  polled(stats: Stats, rates: Rates | null, room: RoomStatus) {
    byId("dash-updated").dataset.stale = "false";
    loopControls.render(stats);
    readout("waiting", stats.waiting);
    readout("active", stats.active);
    readout("holds", stats.seats.held + Object.values(stats.generalAdmission).reduce((n, g) => n + (g.held ?? 0), 0));
    if (rates) {
      readout("admissions", rates.admissions);
      readout("sales", rates.sales);
      if (rates.conflicts !== null) readout("conflicts", rates.conflicts);
    }
    renderRoom(stats, room);
    renderSections(stats);
    setText("dash-updated", `Updated ${new Date().toLocaleTimeString()}`);
  },
  charted(history: ChartHistory) {
    const { end, span } = history;
    for (const name of Object.keys(charts) as ChartName[]) charts[name].chart.show(history.series(name), end, span);
    const loop = history.loop();
    loopChart.show(loop, end, span);
    const readoutEl = document.querySelector<HTMLElement>('[data-chart="loop"]');
    if (readoutEl) readoutEl.textContent = loop.latest ? `${rate(loop.latest.rate)}/s · ${loop.latest.reason}` : "–";
    setText("charts-title", history.size > 0 ? `Last ${spanText(span).replace(/^the last /, "")}` : "Live");
  },
  stale(reason) {
    setText("dash-updated", reason);
    byId("dash-updated").dataset.stale = "true";
  },
  applied(settings: WaitingRoomSettings) {
    const rateInput = byId<HTMLInputElement>("settings-rate");
    rateInput.dataset.dirty = "false";
    rateInput.value = String(settings.admitPerSecond);
    byId<HTMLInputElement>("settings-max").value = String(settings.maxActive);
    void sale.refresh();
  },
  message: (m) => showMessage(FLASH, m),
  clearMessage: () => clearFlash(FLASH),
};
model.observe(view);

const loopControls = initLoopControls({
  model,
  confirm: confirmChange,
  flashRegion: FLASH,
});

const sale = initSaleControls({
  api,
  token: () => model.token,
  eventId: () => model.eventId,
  confirm: confirmChange,
  flashRegion: FLASH,
  changed: () => void model.pollOnce(),
});

// --- settings, with a confirmation step ------------------------------------------------------

function confirmChange(title: string, changes: Change[], warning: string): Promise<boolean> {
  const dialog = byId<HTMLDialogElement>("confirm");
  setText("confirm-title", title);
  byId("confirm-list").replaceChildren(
    ...changes.map((c) => h("li", {}, h("strong", {}, c.field), `: ${c.from} → `, h("strong", {}, c.to))),
  );
  setText("confirm-warning", warning);
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "apply"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    byId("confirm-apply").focus();
  });
}

async function reviewSettings() {
  const rateInput = byId<HTMLInputElement>("settings-rate");
  const maxInput = byId<HTMLInputElement>("settings-max");
  const plan = model.planSettings(rateInput.value, maxInput.value);
  if (!plan.ok) {
    showMessage(FLASH, plan.message);
    if (plan.field === "rate") rateInput.focus();
    if (plan.field === "max") maxInput.focus();
    return;
  }
  if (await confirmChange(`Change admission for ${model.eventId}?`, plan.changes, plan.warning)) {
    await model.apply(plan.patch);
  }
}

async function togglePause() {
  const plan = model.planPause(byId("settings-pause").dataset.action === "resume");
  if (await confirmChange(plan.title, plan.changes, plan.warning)) await model.apply(plan.patch);
}

// --- boot ------------------------------------------------------------------------------------

function initConnectForm() {
  const eventInput = byId<HTMLInputElement>("connect-event");
  const tokenInput = byId<HTMLInputElement>("connect-token");
  eventInput.value = model.eventId;
  byId<HTMLFormElement>("connect-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = eventInput.value.trim();
    if (!isEventId(chosen)) {
      flash(FLASH, "warning", "That event id doesn't look right.", "Letters, digits and _ (up to 32).");
      eventInput.focus();
      return;
    }
    const typed = tokenInput.value.trim();
    if (!typed && !model.token) {
      flash(FLASH, "warning", "Enter the operator token.");
      tokenInput.focus();
      return;
    }
    if (typed) {
      model.token = typed;
      rememberOperatorToken(typed);
      tokenInput.value = "";
    }
    const url = new URL(location.href);
    url.searchParams.set("event", chosen);
    history.replaceState(null, "", url.toString());
    void model.connect(chosen);
  });
  byId("connect-forget").addEventListener("click", () => {
    model.token = null;
    rememberOperatorToken(null);
    flash(FLASH, "info", "The operator token was removed from this tab.");
  });
  setText("connect-token-state", model.token ? "A token is kept for this tab; leave the field empty to use it." : "");
}

function start() {
  if (apiIsElsewhere(api.base)) {
    const note = byId("api-note");
    note.hidden = false;
    note.textContent = `This console sends your operator token to ${api.base}. Only continue if you trust it.`;
  }
  renderCharts();
  initConnectForm();
  byId("dash-disconnect").addEventListener("click", () => {
    model.disconnect();
    byId("connect-title").focus();
  });
  byId<HTMLFormElement>("settings-form").addEventListener("submit", (event) => {
    event.preventDefault();
    void reviewSettings();
  });
  byId("settings-rate").addEventListener("input", (event) => {
    (event.target as HTMLInputElement).dataset.dirty = "true";
  });
  byId("settings-pause").addEventListener("click", () => void togglePause());
  if (model.token && eventIdFromUrl()) void model.connect(model.eventId);
}

start();
