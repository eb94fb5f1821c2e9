/**
 * The operator console: live charts of the line and the sale (from successive stats polls and the
 * gateway's /metrics), admission controls with a confirmation step, and seat counts by section.
 * The operator token is typed into the page and kept in sessionStorage (this tab only).
 */
import { Api } from "./api.js";
import { apiBase, apiIsElsewhere, DEFAULT_EVENT_ID, eventIdFromUrl, isEventId } from "./config.js";
import { Sparkline } from "./chart.js";
import { byId, clearFlash, flash, h, setText } from "./dom.js";
import { operatorToken, rememberOperatorToken } from "./storage.js";
import type { Stats, WaitingRoomInfo, WaitingRoomSettings } from "./types.js";

const FLASH = "flash";
const POLL_MS = 1_000;
const api = new Api(apiBase());

let eventId = eventIdFromUrl() ?? DEFAULT_EVENT_ID;
let token: string | null = operatorToken();
let pollTimer: ReturnType<typeof setTimeout> | undefined;
let connected = false;
let state = "";
let inForce: Partial<WaitingRoomSettings> = {};
/** Counter samples of the last few seconds; rates are taken over this window, not one noisy poll. */
interface Sample {
  at: number;
  admitted: number;
  sold: number;
  conflicts: number | null;
}
const RATE_WINDOW_MS = 5_000;
let samples: Sample[] = [];
let failures = 0;

const rate = (v: number) => (v >= 10 ? Math.round(v).toLocaleString() : v.toFixed(1));
const charts = {
  waiting: { title: "Queue depth", unit: "fans waiting", chart: new Sparkline("Queue depth") },
  admissions: {
    title: "Admissions / s",
    unit: "fans let in per second (5 s average)",
    chart: new Sparkline("Admissions per second", 120, rate),
  },
  active: { title: "Active sessions", unit: "fans shopping", chart: new Sparkline("Active sessions") },
  holds: { title: "Seats held", unit: "seats in holds", chart: new Sparkline("Seats held") },
  sales: {
    title: "Sales / s",
    unit: "seats sold per second (5 s average)",
    chart: new Sparkline("Seats sold per second", 120, rate),
  },
  conflicts: {
    title: "Conflicts / s",
    unit: "holds lost to another fan (5 s average; this gateway, all events)",
    chart: new Sparkline("Conflicts per second", 120, rate),
  },
} as const;
type ChartName = keyof typeof charts;
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

function sumMetric(text: string, name: string): number | null {
  let total = 0;
  let seen = false;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(value)) {
      total += value;
      seen = true;
    }
  }
  return seen ? total : 0;
}

async function pollOnce(): Promise<void> {
  if (!token) return;
  const path = `/v1/admin/events/${encodeURIComponent(eventId)}`;
  const [statsRes, infoRes, metricsRes] = await Promise.all([
    api.call<Stats>("GET", `${path}/stats`, { token }),
    api.call<WaitingRoomInfo>("GET", `/v1/events/${encodeURIComponent(eventId)}/waiting-room`),
    api.call<string>("GET", "/metrics", { text: true }),
  ]);
  if (!statsRes.ok) {
    if (statsRes.status === 401 || statsRes.status === 403) {
      disconnect();
      flash(FLASH, "error", "The operator token was refused.", "Check it and connect again.");
      return;
    }
    if (statsRes.status === 404) {
      disconnect();
      flash(FLASH, "error", `There is no event "${eventId}".`);
      return;
    }
    failures++;
    setText("dash-updated", `Can't reach the gateway (${statsRes.error.message}); retrying…`);
    byId("dash-updated").dataset.stale = "true";
    return;
  }
  failures = 0;
  byId("dash-updated").dataset.stale = "false";
  const stats = statsRes.body;
  const now = performance.now();
  const conflicts = metricsRes.ok ? sumMetric(metricsRes.body, "gateway_conflicts_total") : null;
  const sold = stats.seats.sold + Object.values(stats.generalAdmission).reduce((n, g) => n + g.sold, 0);

  push("waiting", stats.waiting);
  push("active", stats.active);
  push("holds", stats.seats.held);
  const current: Sample = { at: now, admitted: stats.admitted, sold, conflicts };
  const base = samples.find((s) => now - s.at <= RATE_WINDOW_MS + 500) ?? samples[samples.length - 1];
  if (base) {
    const dt = Math.max(0.001, (now - base.at) / 1000);
    push("admissions", Math.max(0, current.admitted - base.admitted) / dt);
    push("sales", Math.max(0, current.sold - base.sold) / dt);
    if (current.conflicts !== null && base.conflicts !== null) {
      push("conflicts", Math.max(0, current.conflicts - base.conflicts) / dt);
    }
  }
  samples = [...samples.filter((s) => now - s.at <= RATE_WINDOW_MS + 500), current];

  if (infoRes.ok) {
    inForce.admitPerSecond = infoRes.body.admitPerSecond;
    state = infoRes.body.state;
  } else if (stats.waitingRoom) {
    state = stats.waitingRoom.state;
  }
  renderState(stats);
  renderSections(stats);
  setText("dash-updated", `Updated ${new Date().toLocaleTimeString()}`);
}

function push(name: ChartName, value: number) {
  const c = charts[name];
  c.chart.push(value);
  const el = readouts.get(name);
  if (el)
    el.textContent =
      name === "admissions" || name === "sales" || name === "conflicts" ? rate(value) : value.toLocaleString();
}

function renderState(stats: Stats) {
  // "paused" is either the pause switch or a rate of 0; the button is about the switch.
  const rateZero = inForce.admitPerSecond === 0;
  const paused = inForce.paused ?? (state === "paused" && !rateZero);
  setText("dash-state", state === "paused" && rateZero && !paused ? "paused (rate 0)" : state || "unknown");
  byId("dash-state").dataset.state = state;
  setText(
    "dash-summary",
    `${stats.admitted.toLocaleString()} admitted so far · ${stats.active.toLocaleString()} shopping now · ` +
      `${stats.purchases.confirmed.toLocaleString()} purchases confirmed, ${stats.purchases.pending.toLocaleString()} pending, ` +
      `${stats.purchases.failed.toLocaleString()} failed`,
  );
  const parts = [`admitPerSecond ${inForce.admitPerSecond ?? "?"}`];
  if (inForce.maxActive !== undefined) parts.push(`maxActive ${inForce.maxActive}`);
  if (stats.waitingRoom) parts.push(`effective ${rate(stats.waitingRoom.effectiveAdmitPerSecond)}/s`);
  setText("settings-in-force", `In force: ${parts.join(" · ")}`);
  const rateInput = byId<HTMLInputElement>("settings-rate");
  if (
    rateInput.dataset.dirty !== "true" &&
    document.activeElement !== rateInput &&
    inForce.admitPerSecond !== undefined
  ) {
    rateInput.value = String(inForce.admitPerSecond);
  }
  const pause = byId<HTMLButtonElement>("settings-pause");
  pause.textContent = paused ? "Resume admission…" : "Pause admission…";
  pause.dataset.action = paused ? "resume" : "pause";
}

function renderSections(stats: Stats) {
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

function schedule() {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(
    async () => {
      await pollOnce();
      if (connected) schedule();
    },
    failures > 0 ? Math.min(10_000, POLL_MS * 2 ** failures) : POLL_MS,
  );
}

async function connect() {
  connected = true;
  samples = [];
  byId("connect").hidden = true;
  byId("dash").hidden = false;
  setText("dash-event", eventId);
  clearFlash(FLASH);
  await pollOnce();
  if (connected) {
    byId("dash-title").focus();
    schedule();
  }
}

function disconnect() {
  connected = false;
  clearTimeout(pollTimer);
  byId("dash").hidden = true;
  byId("connect").hidden = false;
}

// --- settings, with a confirmation step ------------------------------------------------------

interface Change {
  field: string;
  from: string;
  to: string;
}

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

async function applyPatch(patch: Partial<WaitingRoomSettings>) {
  if (!token) return;
  const res = await api.call<WaitingRoomSettings>(
    "PATCH",
    `/v1/admin/events/${encodeURIComponent(eventId)}/waiting-room`,
    { token, json: patch },
  );
  if (!res.ok) {
    flash(FLASH, "error", "The change was not applied.", res.error.message);
    return;
  }
  inForce = { ...inForce, ...res.body };
  const rateInput = byId<HTMLInputElement>("settings-rate");
  rateInput.dataset.dirty = "false";
  rateInput.value = String(res.body.admitPerSecond);
  const maxInput = byId<HTMLInputElement>("settings-max");
  maxInput.value = String(res.body.maxActive);
  flash(
    FLASH,
    "success",
    "Applied on every gateway.",
    `admitPerSecond ${res.body.admitPerSecond} · maxActive ${res.body.maxActive} · ${res.body.paused ? "paused" : "not paused"}`,
  );
  await pollOnce();
}

async function reviewSettings() {
  const rateInput = byId<HTMLInputElement>("settings-rate");
  const maxInput = byId<HTMLInputElement>("settings-max");
  const patch: Partial<WaitingRoomSettings> = {};
  const changes: Change[] = [];
  if (rateInput.value.trim() !== "") {
    const value = Number(rateInput.value);
    if (!Number.isFinite(value) || value < 0 || value > 100_000) {
      flash(FLASH, "warning", "Admissions per second must be a number from 0 to 100,000.");
      rateInput.focus();
      return;
    }
    if (value !== inForce.admitPerSecond) {
      patch.admitPerSecond = value;
      changes.push({ field: "Admissions per second", from: String(inForce.admitPerSecond ?? "?"), to: String(value) });
    }
  }
  if (maxInput.value.trim() !== "") {
    const value = Number(maxInput.value);
    if (!Number.isInteger(value) || value < 1) {
      flash(FLASH, "warning", "Max active sessions must be a whole number, at least 1.");
      maxInput.focus();
      return;
    }
    if (value !== inForce.maxActive) {
      patch.maxActive = value;
      changes.push({ field: "Max active sessions", from: String(inForce.maxActive ?? "unknown"), to: String(value) });
    }
  }
  if (changes.length === 0) {
    flash(FLASH, "info", "Nothing to change.", "Edit a value first.");
    return;
  }
  const warning =
    patch.admitPerSecond === 0
      ? "A rate of 0 stops admissions until it is raised again."
      : "Takes effect at once on every gateway. It is not retroactive: the new rate counts from now.";
  if (await confirmChange(`Change admission for ${eventId}?`, changes, warning)) await applyPatch(patch);
}

async function togglePause() {
  const resume = byId("settings-pause").dataset.action === "resume";
  const changes = [{ field: "Admission", from: resume ? "paused" : "running", to: resume ? "running" : "paused" }];
  const warning = resume
    ? inForce.admitPerSecond === 0
      ? "The rate is 0: nobody is admitted until you also raise it."
      : "Fans are admitted again at the set rate from now on."
    : "Nobody is admitted while paused; fans in line keep their places.";
  if (await confirmChange(resume ? "Resume admission?" : "Pause admission?", changes, warning)) {
    await applyPatch({ paused: !resume });
  }
}

// --- boot ------------------------------------------------------------------------------------

function start() {
  if (apiIsElsewhere(api.base)) {
    const note = byId("api-note");
    note.hidden = false;
    note.textContent = `This console sends your operator token to ${api.base}. Only continue if you trust it.`;
  }
  renderCharts();
  const eventInput = byId<HTMLInputElement>("connect-event");
  const tokenInput = byId<HTMLInputElement>("connect-token");
  eventInput.value = eventId;
  byId<HTMLFormElement>("connect-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = eventInput.value.trim();
    if (!isEventId(chosen)) {
      flash(FLASH, "warning", "That event id doesn't look right.", "Letters, digits and _ (up to 32).");
      eventInput.focus();
      return;
    }
    const typed = tokenInput.value.trim();
    if (!typed && !token) {
      flash(FLASH, "warning", "Enter the operator token.");
      tokenInput.focus();
      return;
    }
    if (typed) {
      token = typed;
      rememberOperatorToken(typed);
      tokenInput.value = "";
    }
    eventId = chosen;
    const url = new URL(location.href);
    url.searchParams.set("event", eventId);
    history.replaceState(null, "", url.toString());
    void connect();
  });
  byId("connect-forget").addEventListener("click", () => {
    token = null;
    rememberOperatorToken(null);
    flash(FLASH, "info", "The operator token was removed from this tab.");
  });
  byId("dash-disconnect").addEventListener("click", () => {
    disconnect();
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
  setText("connect-token-state", token ? "A token is kept for this tab; leave the field empty to use it." : "");
  if (token && eventIdFromUrl()) void connect();
}

start();
