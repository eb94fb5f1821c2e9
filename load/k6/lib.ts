/**
 * The gateway's HTTP contract (/work/shared/API.md) for k6 scenarios. Runs in k6's own JS
 * runtime: no Node APIs. Options come from environment variables (`k6 run -e FANS=5000 ...`).
 */
import { check, sleep } from "k6";
import exec from "k6/execution";
import http, { type RefinedResponse, type ResponseType } from "k6/http";
import { Counter, Rate, Trend } from "k6/metrics";

export const BASE_URL = (__ENV.BASE_URL ?? "http://127.0.0.1:8080").replace(/\/$/, "");
export const ADMIN_TOKEN = __ENV.ADMIN_TOKEN ?? "";
export const FANS = Number(__ENV.FANS ?? 1000);
export const RATE = Number(__ENV.RATE ?? 200);
export const DURATION = Number(__ENV.DURATION ?? 60);

export const admitted = new Counter("fans_admitted");
export const holds = new Counter("holds_granted");
export const sales = new Counter("sales_confirmed");
export const conflicts = new Counter("hold_conflicts");
export const released = new Counter("holds_released");
export const abandoned = new Counter("fans_abandoned");
export const botAccepted = new Counter("bot_requests_accepted");
export const botRefused = new Rate("bot_requests_refused");
export const timeToAdmit = new Trend("time_to_admit", true);
export const unexpected = new Counter("unexpected_responses");

type Res = RefinedResponse<ResponseType | undefined>;

export interface Setup {
  eventId: string;
  sections: { id: string; rows: number; seatsPerRow: number }[];
}

export interface EventLayout {
  sections: { id: string; tier: string; price: number; rows: number; seatsPerRow: number }[];
}

function headers(token?: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    "content-type": "application/json",
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    ...extra,
  };
}

function json<T>(res: Res): T | undefined {
  try {
    return res.json() as unknown as T;
  } catch {
    return undefined;
  }
}

/** Creates a fresh event when ADMIN_TOKEN is given (and EVENT_ID is not); else uses EVENT_ID (default demo). */
export function setupEvent(layout: EventLayout, onSaleInSeconds = 5): Setup {
  if (__ENV.EVENT_ID || !ADMIN_TOKEN) {
    const eventId = __ENV.EVENT_ID ?? "demo";
    const map = json<{ sections: { id: string; total: number }[] }>(
      http.get(`${BASE_URL}/v1/events/${eventId}/seatmap`),
    );
    const sections = (map?.sections ?? []).map((s) => ({ id: s.id, rows: 0, seatsPerRow: 0 }));
    return { eventId, sections };
  }
  const eventId = `k6_${Date.now().toString(36)}`;
  const res = http.put(
    `${BASE_URL}/v1/admin/events/${eventId}`,
    JSON.stringify({
      name: `k6 ${eventId}`,
      onSaleAt: new Date(Date.now() + onSaleInSeconds * 1000).toISOString(),
      holdSeconds: 60,
      maxSeatsPerFan: 4,
      sections: layout.sections,
      generalAdmission: [],
      waitingRoom: { admitPerSecond: Math.max(100, RATE * 2), maxActive: Math.max(1000, FANS), sessionSeconds: 900 },
    }),
    { headers: headers(ADMIN_TOKEN), tags: { endpoint: "admin_put_event" }, timeout: "120s" },
  );
  if (res.status !== 201 && res.status !== 200) exec.test.abort(`event not created: ${res.status} ${res.body}`);
  return { eventId, sections: layout.sections };
}

export function join(eventId: string, fanId: string): { queueToken: string; position: number; status: string } | null {
  const res = http.post(`${BASE_URL}/v1/events/${eventId}/queue`, JSON.stringify({ fanId }), {
    headers: headers(),
    tags: { endpoint: "join" },
  });
  check(res, { "join 201/200": (r) => r.status === 201 || r.status === 200 }) || unexpected.add(1);
  return json(res) ?? null;
}

export interface Status {
  status: string;
  position: number;
  pollAfterSeconds: number;
  accessToken?: string;
}

export function status(eventId: string, queueToken: string): Status | null {
  const res = http.get(`${BASE_URL}/v1/events/${eventId}/queue/status`, {
    headers: headers(queueToken),
    tags: { endpoint: "status" },
  });
  check(res, { "status 200": (r) => r.status === 200 }) || unexpected.add(1);
  return res.status === 200 ? (json<Status>(res) ?? null) : null;
}

/** Polls at the suggested interval until admitted; gives up (abandons) when `giveUp()` says so. */
export function waitForAdmission(
  eventId: string,
  queueToken: string,
  giveUp: () => boolean = () => false,
): string | null {
  const started = Date.now();
  const deadline = started + Number(__ENV.MAX_WAIT ?? 600) * 1000;
  while (Date.now() < deadline) {
    const s = status(eventId, queueToken);
    if (s?.accessToken) {
      admitted.add(1);
      timeToAdmit.add(Date.now() - started);
      return s.accessToken;
    }
    if (giveUp()) {
      abandoned.add(1);
      return null;
    }
    sleep(Math.min(Math.max(s?.pollAfterSeconds ?? 1, 0.5), 10));
  }
  return null;
}

export function sectionSeats(eventId: string, sectionId: string): string[] {
  // The compact form: the layout as [row, firstSeat, count] runs, one status character a seat.
  const res = http.get(`${BASE_URL}/v1/events/${eventId}/sections/${sectionId}/seats?format=compact`, {
    tags: { endpoint: "section_seats" },
  });
  const body = json<{ sectionId: string; layout: [number, number, number][]; status: string }>(res);
  const available: string[] = [];
  let i = 0;
  for (const [row, first, count] of body?.layout ?? []) {
    for (let k = 0; k < count; k++, i++)
      if (body?.status[i] === "a") available.push(`${sectionId}-${row}-${first + k}`);
  }
  return available;
}

export function hold(eventId: string, accessToken: string, seats: string[]): { holdId: string } | "conflict" | null {
  const res = http.post(`${BASE_URL}/v1/events/${eventId}/holds`, JSON.stringify({ seats }), {
    headers: headers(accessToken),
    tags: { endpoint: "hold" },
    responseCallback: http.expectedStatuses(201, 409),
  });
  if (res.status === 201) {
    holds.add(1);
    return json<{ holdId: string }>(res) ?? null;
  }
  if (res.status === 409) {
    conflicts.add(1);
    return "conflict";
  }
  unexpected.add(1);
  return null;
}

export function release(eventId: string, accessToken: string, holdId: string): void {
  const res = http.del(`${BASE_URL}/v1/events/${eventId}/holds/${holdId}`, null, {
    headers: headers(accessToken),
    tags: { endpoint: "release" },
  });
  if (check(res, { "release 204": (r) => r.status === 204 })) released.add(1);
  else unexpected.add(1);
}

export function purchase(eventId: string, accessToken: string, holdId: string): boolean {
  const res = http.post(
    `${BASE_URL}/v1/events/${eventId}/holds/${holdId}/purchase`,
    JSON.stringify({ paymentToken: "tok_ok" }),
    {
      headers: headers(accessToken, { "idempotency-key": `k6-${holdId}` }),
      tags: { endpoint: "purchase" },
      responseCallback: http.expectedStatuses(201, 202, 409),
    },
  );
  if (res.status === 201 || res.status === 202) {
    sales.add(1);
    return true;
  }
  return false;
}

function pick<T>(items: T[], n: number): T[] {
  const out: T[] = [];
  const copy = items.slice();
  while (out.length < n && copy.length > 0) out.push(copy.splice(Math.floor(Math.random() * copy.length), 1)[0] as T);
  return out;
}

/** Looks at the seat map and tries to hold `want` seats, preferring `sections` in order; retries on 409. */
export function holdSomething(
  eventId: string,
  accessToken: string,
  sections: string[],
  want = 2,
  attempts = 5,
): string | null {
  for (let i = 0; i < attempts; i++) {
    for (const sectionId of sections) {
      const available = sectionSeats(eventId, sectionId);
      if (available.length === 0) continue;
      const result = hold(eventId, accessToken, pick(available.slice(0, 200), want));
      if (result && result !== "conflict") return result.holdId;
      break;
    }
    sleep(0.2 + Math.random() * 0.3);
  }
  return null;
}

/** A fan's whole journey: join, wait, hold, think, buy. */
export function fanJourney(
  setup: Setup,
  options: { sections?: string[]; abandonWaiting?: number; abandonHold?: number } = {},
): void {
  const fanId = `k6-${exec.vu.idInTest}-${exec.scenario.iterationInTest}-${Math.random().toString(36).slice(2, 8)}`;
  const joined = join(setup.eventId, fanId);
  if (!joined) return;
  const leaveAt = Date.now() + Math.random() * 20_000;
  const leaves = Math.random() < (options.abandonWaiting ?? 0);
  const access = waitForAdmission(setup.eventId, joined.queueToken, () => leaves && Date.now() > leaveAt);
  if (!access) return;
  const holdId = holdSomething(setup.eventId, access, options.sections ?? setup.sections.map((s) => s.id));
  if (!holdId) return;
  sleep(1 + Math.random() * 2);
  if (Math.random() < (options.abandonHold ?? 0)) {
    release(setup.eventId, access, holdId);
    return;
  }
  purchase(setup.eventId, access, holdId);
}

interface SummaryData {
  metrics: Record<
    string,
    { type: string; values: Record<string, number>; thresholds?: Record<string, { ok: boolean }> }
  >;
  state?: { testRunDurationMs?: number };
}

/** A plain-text summary (k6-summary's textSummary without the remote import) plus a JSON file. */
export function summary(name: string) {
  return (data: SummaryData): Record<string, string> => {
    const lines = [
      `scenario ${name} against ${BASE_URL} (${((data.state?.testRunDurationMs ?? 0) / 1000).toFixed(1)} s)`,
    ];
    for (const [metric, m] of Object.entries(data.metrics).sort(([a], [b]) => a.localeCompare(b))) {
      const v = m.values;
      const shown =
        m.type === "trend"
          ? `p50=${(v.med ?? 0).toFixed(1)} p95=${(v["p(95)"] ?? 0).toFixed(1)} p99=${(v["p(99)"] ?? 0).toFixed(1)} max=${(v.max ?? 0).toFixed(1)}`
          : m.type === "rate"
            ? `${((v.rate ?? 0) * 100).toFixed(2)}%`
            : m.type === "counter"
              ? `${v.count ?? 0} (${(v.rate ?? 0).toFixed(1)}/s)`
              : `${v.value ?? 0}`;
      const th = m.thresholds
        ? Object.entries(m.thresholds)
            .map(([t, r]) => `${r.ok ? "ok" : "FAILED"} ${t}`)
            .join(", ")
        : "";
      lines.push(`  ${metric.padEnd(32)} ${shown}${th ? `   [${th}]` : ""}`);
    }
    return { stdout: `${lines.join("\n")}\n`, [`summary-${name}.json`]: JSON.stringify(data, null, 2) };
  };
}
