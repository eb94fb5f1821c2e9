/**
 * The gateway's HTTP contract (docs/API.md) for k6 scenarios. Runs in k6's own JS
 * runtime: no Node APIs. Options come from environment variables (`k6 run -e FANS=5000 ...`).
 */
import { check, sleep } from "k6";
import crypto from "k6/crypto";
import exec from "k6/execution";
import http, { type RefinedResponse, type ResponseType } from "k6/http";
import { Counter, Rate, Trend } from "k6/metrics";
import type { Options } from "k6/options";
import { pollDelaySeconds } from "../poll.ts";
import { ROUTES, type RouteName, routePath } from "../routes.ts";
import {
  type EndpointFigures,
  type GeneratorRecord,
  RUN_RECORD_KIND,
  type RunRecord,
  runFileName,
} from "../run-record.ts";

export const BASE_URL = (__ENV.BASE_URL ?? "http://127.0.0.1:8080").replace(/\/$/, "");
export const ADMIN_TOKEN = __ENV.ADMIN_TOKEN ?? "";
export const FANS = Number(__ENV.FANS ?? 1000);
export const RATE = Number(__ENV.RATE ?? 200);
/** The join's proof-of-work cost set on a created event (bots.ts sets 10 unless told); 0: off. */
export const POW_BITS = Number(__ENV.POW_BITS ?? 0);
export const DURATION = Number(__ENV.DURATION ?? 60);
/**
 * The operator's load-test token (the gateway's LOAD_TEST_TOKEN): sent on every request, it lifts
 * the per-IP limit for this load generator, never the per-fan one, so the gateway runs with its
 * limits on.
 */
export const LOAD_TEST_TOKEN = __ENV.LOAD_TEST_TOKEN ?? "";

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
/**
 * Requests k6 gave up on, unanswered: status 0 with error_code 1050 (request timeout) or 1211 (TCP
 * dial timeout). Counted apart from http_req_failed (which counts them too, among the gateway's
 * refusals and errors): a k6 out of CPU reads its answers late and times them out itself, and the
 * summary reports them as a failure of the test setup (issue 31).
 */
export const clientTimeouts = new Counter("client_timeouts");

/** k6's error codes for a request it gave up on: request timeout, TCP dial timeout. */
export const TIMEOUT_ERROR_CODES: readonly number[] = [1050, 1211];

/** The response, after counting it in client_timeouts when k6 gave up on it. */
export function counted<R extends { error_code: number }>(res: R, endpoint: string): R {
  if (TIMEOUT_ERROR_CODES.includes(res.error_code)) clientTimeouts.add(1, { endpoint });
  return res;
}

/**
 * Metrics whose thresholds judge the test setup, not the gateway: fans k6 planned and never
 * started (`dropped_iterations`: no VU free, or none initialized in time) and requests it gave up
 * on. A gateway threshold missed beside one of these measured the generator.
 */
export const SETUP_METRICS = ["dropped_iterations", "client_timeouts"] as const;

/**
 * Arrival-rate stages that start exactly `fans` fans, `rate` a second at the peak: a ramp up over
 * `rampUp` s, the peak, a ramp down over `rampDown` s (k6 starts an iteration per unit of the
 * rate's integral). With fewer fans than the ramps hold, the ramps are shortened to fit. Exactly
 * `fans`, so that with maxVUs = fans no VU can run short by the script's own plan: a dropped
 * iteration is then the generator's (a VU not initialized in time), not the scenario's.
 */
export function arrivalStages(
  fans: number,
  rate: number,
  rampUp = 2,
  rampDown = 0,
): { target: number; duration: string }[] {
  const ramps = (rampUp + rampDown) / 2;
  const scale = ramps > 0 ? Math.min(1, fans / rate / ramps) : 1;
  const ms = (seconds: number) => `${Math.max(1, Math.round(seconds * 1000))}ms`;
  const peak = fans / rate - ramps * scale;
  return [
    ...(rampUp > 0 ? [{ target: rate, duration: ms(rampUp * scale) }] : []),
    ...(peak > 0 ? [{ target: rate, duration: ms(peak) }] : []),
    ...(rampDown > 0 ? [{ target: 0, duration: ms(rampDown * scale) }] : []),
  ];
}

/** The wait between two polls (load/poll.ts), here for the scripts and their tests. */
export { pollDelaySeconds };

type Res = RefinedResponse<ResponseType | undefined>;

export interface Setup {
  eventId: string;
  sections: { id: string; rows: number; seatsPerRow: number }[];
}

export interface EventLayout {
  sections: { id: string; tier: string; price: number; rows: number; seatsPerRow: number }[];
}

/** Headers every request of this run carries (the load-test token, when given). */
export function runHeaders(): Record<string, string> {
  return LOAD_TEST_TOKEN ? { "x-load-test-token": LOAD_TEST_TOKEN } : {};
}

function headers(token?: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    "content-type": "application/json",
    ...runHeaders(),
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    ...extra,
  };
}

/**
 * Tags of a request: `endpoint` for the thresholds and `name`, the route template, so that a URL
 * with a hold id in it is one metric series per route, not one per hold.
 */
export function tagsFor(endpoint: string, route: RouteName): { endpoint: string; name: string } {
  return { endpoint, name: routePath(route) };
}

/** The endpoints every run reports p50/p95/p99, requests and errors of (summary and load:compare). */
export const ENDPOINTS = ["join", "status", "section_seats", "hold", "release", "purchase", "bot"] as const;

/** Trend statistics in the summary: p(99) included, which k6's default set lacks. */
export const SUMMARY_TREND_STATS = ["avg", "min", "med", "max", "p(90)", "p(95)", "p(99)", "count"];

// k6 puts a submetric (per endpoint) in the summary only when a threshold names it: these always
// hold, and the text summary leaves them out.
const REPORTING_THRESHOLDS = ["max>=0", "count>=0", "rate>=0"];

/**
 * A scenario's options with what every run reports: p(99) in the trend stats, and per-endpoint
 * duration, request and failure submetrics (the scenario's own thresholds are kept as they are).
 */
export function withRunReport(options: Options): Options {
  const thresholds: NonNullable<Options["thresholds"]> = { ...options.thresholds };
  for (const endpoint of ENDPOINTS) {
    thresholds[`http_req_duration{endpoint:${endpoint}}`] ??= ["max>=0"];
    thresholds[`http_reqs{endpoint:${endpoint}}`] ??= ["count>=0"];
    thresholds[`http_req_failed{endpoint:${endpoint}}`] ??= ["rate>=0"];
  }
  // The test setup's own: every planned fan started, no request given up on by k6.
  for (const metric of SETUP_METRICS) thresholds[metric] ??= ["count==0"];
  return { ...options, summaryTrendStats: SUMMARY_TREND_STATS, thresholds };
}

function json<T>(res: Res): T | undefined {
  try {
    return res.json() as unknown as T;
  } catch {
    return undefined;
  }
}

/** Creates a fresh event when ADMIN_TOKEN is given (and EVENT_ID is not); else uses EVENT_ID (default demo). */
export function setupEvent(layout: EventLayout, onSaleInSeconds = 5, waitingRoom?: Record<string, unknown>): Setup {
  if (__ENV.EVENT_ID || !ADMIN_TOKEN) {
    const eventId = __ENV.EVENT_ID ?? "demo";
    const map = json<{ sections: { id: string; total: number }[] }>(
      http.get(`${BASE_URL}/v1/events/${eventId}/seatmap`, {
        headers: runHeaders(),
        tags: tagsFor("seatmap", ROUTES.seatmap),
      }),
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
    { headers: headers(ADMIN_TOKEN), tags: tagsFor("admin_put_event", ROUTES.putEvent), timeout: "120s" },
  );
  if (res.status !== 201 && res.status !== 200) exec.test.abort(`event not created: ${res.status} ${res.body}`);
  if (waitingRoom) {
    const patched = http.patch(`${BASE_URL}/v1/admin/events/${eventId}/waiting-room`, JSON.stringify(waitingRoom), {
      headers: headers(ADMIN_TOKEN),
      tags: tagsFor("admin_settings", ROUTES.settings),
    });
    if (patched.status !== 200) exec.test.abort(`settings refused: ${patched.status} ${patched.body}`);
  }
  return { eventId, sections: layout.sections };
}

/** Leading zero bits of a hex digest. */
function zeroBitsOfHex(hex: string): number {
  let n = 0;
  for (const c of hex) {
    const v = Number.parseInt(c, 16);
    if (v === 0) {
      n += 4;
      continue;
    }
    return n + (v < 2 ? 3 : v < 4 ? 2 : v < 8 ? 1 : 0);
  }
  return n;
}

/** Joins spent solving the line's proof of work, and the ms it took (k6's CPU, not a browser's). */
export const powSolveMs = new Trend("pow_solve_ms", true);

/** A nonce such that SHA-256(challenge + ":" + nonce) has `bits` leading zero bits (the gateway's check). */
export function solveChallenge(challenge: string, bits: number): string {
  for (let i = 0; ; i++) {
    const nonce = i.toString(36);
    if (zeroBitsOfHex(crypto.sha256(`${challenge}:${nonce}`, "hex")) >= bits) return nonce;
  }
}

/** Joins; when the line asks a proof of work (428), solves a challenge and joins with it. */
export function join(eventId: string, fanId: string): { queueToken: string; position: number; status: string } | null {
  let res = counted(
    http.post(`${BASE_URL}/v1/events/${eventId}/queue`, JSON.stringify({ fanId }), {
      headers: headers(),
      tags: tagsFor("join", ROUTES.join),
      responseCallback: http.expectedStatuses(200, 201, 428),
    }),
    "join",
  );
  if (res.status === 428) {
    const issued = json<{ challenge: string; bits: number }>(
      counted(
        http.get(`${BASE_URL}/v1/events/${eventId}/queue/challenge?fanId=${encodeURIComponent(fanId)}`, {
          headers: headers(),
          tags: tagsFor("challenge", ROUTES.challenge),
        }),
        "challenge",
      ),
    );
    if (issued) {
      const started = Date.now();
      const nonce = solveChallenge(issued.challenge, issued.bits);
      powSolveMs.add(Date.now() - started);
      res = counted(
        http.post(
          `${BASE_URL}/v1/events/${eventId}/queue`,
          JSON.stringify({ fanId, pow: { challenge: issued.challenge, nonce } }),
          { headers: headers(), tags: tagsFor("join", ROUTES.join) },
        ),
        "join",
      );
    }
  }
  check(res, { "join 201/200": (r) => r.status === 201 || r.status === 200 }) || unexpected.add(1);
  return json(res) ?? null;
}

export interface Status {
  status: string;
  position: number;
  pollAfterSeconds: number;
  /** Scheduled on the fan's ETA when present: followed as given (load/poll.ts). */
  pollAfterMs?: number;
  accessToken?: string;
}

export function status(eventId: string, queueToken: string): Status | null {
  const res = counted(
    http.get(`${BASE_URL}/v1/events/${eventId}/queue/status`, {
      headers: headers(queueToken),
      tags: tagsFor("status", ROUTES.status),
    }),
    "status",
  );
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
    sleep(pollDelaySeconds(s?.pollAfterSeconds, Math.random(), Number.POSITIVE_INFINITY, s?.pollAfterMs));
  }
  return null;
}

export function sectionSeats(eventId: string, sectionId: string): string[] {
  // The compact form: the layout as [row, firstSeat, count] runs, one status character a seat.
  const res = counted(
    http.get(`${BASE_URL}/v1/events/${eventId}/sections/${sectionId}/seats?format=compact`, {
      headers: runHeaders(),
      tags: tagsFor("section_seats", ROUTES.sectionSeats),
    }),
    "section_seats",
  );
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
  const res = counted(
    http.post(`${BASE_URL}/v1/events/${eventId}/holds`, JSON.stringify({ seats }), {
      headers: headers(accessToken),
      tags: tagsFor("hold", ROUTES.hold),
      responseCallback: http.expectedStatuses(201, 409),
    }),
    "hold",
  );
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

/** A best-available request's body (docs/API.md "Best available together"). */
export interface BestAsk {
  quantity: number;
  tier?: string;
  section?: string;
  maxPrice?: number;
  splitRows?: boolean;
}

/**
 * Asks for the best seats together; the gateway proposes them. 409 `no_block_available` with
 * nothing left: sold out (null); with some left, it was contention: tried again, `attempts` times.
 */
export function holdBest(eventId: string, accessToken: string, best: BestAsk, attempts = 3): string | null {
  for (let i = 0; i < attempts; i++) {
    const res = counted(
      http.post(`${BASE_URL}/v1/events/${eventId}/holds`, JSON.stringify({ best }), {
        headers: headers(accessToken),
        tags: tagsFor("hold", ROUTES.hold),
        responseCallback: http.expectedStatuses(201, 409),
      }),
      "hold",
    );
    if (res.status === 201) {
      holds.add(1);
      return json<{ holdId: string }>(res)?.holdId ?? null;
    }
    if (res.status !== 409) {
      unexpected.add(1);
      return null;
    }
    conflicts.add(1);
    const left = json<{ error?: { details?: { available?: number } } }>(res)?.error?.details?.available;
    if (left === 0) return null;
    sleep(0.2 + Math.random() * 0.3);
  }
  return null;
}

export function release(eventId: string, accessToken: string, holdId: string): void {
  const res = counted(
    http.del(`${BASE_URL}/v1/events/${eventId}/holds/${holdId}`, null, {
      headers: headers(accessToken),
      tags: tagsFor("release", ROUTES.release),
    }),
    "release",
  );
  if (check(res, { "release 204": (r) => r.status === 204 })) released.add(1);
  else unexpected.add(1);
}

export function purchase(eventId: string, accessToken: string, holdId: string): boolean {
  const res = counted(
    http.post(`${BASE_URL}/v1/events/${eventId}/holds/${holdId}/purchase`, JSON.stringify({ paymentToken: "tok_ok" }), {
      headers: headers(accessToken, { "idempotency-key": `k6-${holdId}` }),
      tags: tagsFor("purchase", ROUTES.purchase),
      responseCallback: http.expectedStatuses(201, 202, 409),
    }),
    "purchase",
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
  options: { sections?: string[]; abandonWaiting?: number; abandonHold?: number; best?: BestAsk } = {},
): void {
  const fanId = `k6-${exec.vu.idInTest}-${exec.scenario.iterationInTest}-${Math.random().toString(36).slice(2, 8)}`;
  const joined = join(setup.eventId, fanId);
  if (!joined) return;
  const leaveAt = Date.now() + Math.random() * 20_000;
  const leaves = Math.random() < (options.abandonWaiting ?? 0);
  const access = waitForAdmission(setup.eventId, joined.queueToken, () => leaves && Date.now() > leaveAt);
  if (!access) return;
  const holdId = options.best
    ? holdBest(setup.eventId, access, options.best)
    : holdSomething(setup.eventId, access, options.sections ?? setup.sections.map((s) => s.id));
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

/** This run's settings, as the record of the run keeps them. */
function settings(): RunRecord["settings"] {
  const keys = ["FANS", "RATE", "DURATION", "EVENT_ID", "MAX_WAIT"] as const;
  return {
    ...Object.fromEntries(keys.filter((k) => __ENV[k] !== undefined).map((k) => [k.toLowerCase(), __ENV[k] ?? null])),
    loadTestToken: LOAD_TEST_TOKEN !== "",
  };
}

/** The run record (load/run-record.ts) of a k6 summary: totals and, per endpoint, the submetrics. */
export function runRecord(name: string, data: SummaryData, endedAt: number = Date.now()): RunRecord {
  const m = data.metrics;
  const seconds = (data.state?.testRunDurationMs ?? 0) / 1000;
  const endpoints: EndpointFigures[] = [];
  for (const endpoint of ENDPOINTS) {
    const requests = m[`http_reqs{endpoint:${endpoint}}`]?.values.count ?? 0;
    if (requests === 0) continue;
    const d = m[`http_req_duration{endpoint:${endpoint}}`]?.values ?? {};
    endpoints.push({
      endpoint,
      requests,
      // A Rate's "passes" are its true samples: here, the failed requests.
      errors: m[`http_req_failed{endpoint:${endpoint}}`]?.values.passes ?? 0,
      p50: d.med ?? 0,
      p95: d["p(95)"] ?? 0,
      p99: d["p(99)"] ?? 0,
    });
  }
  return {
    kind: RUN_RECORD_KIND,
    version: 1,
    tool: "k6",
    scenario: name,
    startedAt: new Date(endedAt - seconds * 1000).toISOString(),
    target: BASE_URL,
    settings: settings(),
    seconds,
    requests: m.http_reqs?.values.count ?? 0,
    requestsPerSecond: m.http_reqs?.values.rate ?? 0,
    errors: m.http_req_failed?.values.passes ?? 0,
    sales: m.sales_confirmed?.values.count ?? 0,
    endpoints,
    generator: generatorOf(data),
  };
}

/**
 * Whether k6 kept up, from its summary: the fans it planned and never started, and the requests it
 * gave up on. k6 does not report its own CPU (watch it from outside: load/README.md); these are
 * what it can tell of itself. Either one and the run's figures are the generator's, not the gateway's.
 */
export function generatorOf(data: SummaryData): GeneratorRecord {
  const dropped = data.metrics.dropped_iterations?.values.count ?? 0;
  const timeouts = data.metrics.client_timeouts?.values.count ?? 0;
  const reasons: string[] = [];
  if (dropped > 0) {
    reasons.push(
      `${dropped} planned fans never started (dropped_iterations: no VU was free, or none was initialized in time)`,
    );
  }
  if (timeouts > 0) {
    reasons.push(`${timeouts} requests k6 gave up on unanswered (client_timeouts: error_code 1050 or 1211)`);
  }
  return { saturated: reasons.length > 0, reasons, droppedIterations: dropped, clientTimeouts: timeouts };
}

/** Every threshold of the summary but the reporting ones, the setup's apart from the gateway's. */
function thresholdsOf(data: SummaryData): { setup: string[]; gateway: string[]; gatewayFailed: number } {
  const setup: string[] = [];
  const gateway: string[] = [];
  let gatewayFailed = 0;
  for (const [metric, m] of Object.entries(data.metrics).sort(([a], [b]) => a.localeCompare(b))) {
    for (const [t, r] of Object.entries(m.thresholds ?? {})) {
      if (REPORTING_THRESHOLDS.includes(t)) continue;
      const line = `${r.ok ? "ok    " : "FAILED"} ${metric} ${t}`;
      if ((SETUP_METRICS as readonly string[]).includes(metric)) setup.push(line);
      else {
        gateway.push(line);
        if (!r.ok) gatewayFailed++;
      }
    }
  }
  return { setup, gateway, gatewayFailed };
}

/** The summary's words on the generator, and on the gateway's thresholds when it did not keep up. */
export function generatorLines(data: SummaryData): string[] {
  const g = generatorOf(data);
  const t = thresholdsOf(data);
  if (!g.saturated) {
    return [
      `load generator kept up: 0 dropped iterations, 0 client-side timeouts (k6 does not measure its own CPU: see load/README.md, where to run the load)`,
    ];
  }
  return [
    "GENERATOR SATURATED: the figures measure the load generator, not the gateway (a failure of the test setup)",
    ...g.reasons.map((r) => `  ${r}`),
    t.gatewayFailed > 0
      ? `  ${t.gatewayFailed} of the gateway's thresholds missed meanwhile: not the gateway's verdict; run again from a bigger or a second generator`
      : "  the gateway's thresholds were met all the same (with the generator's delays in them)",
  ];
}

/**
 * A plain-text summary (k6-summary's textSummary without the remote import) plus a JSON file per
 * run, `summary-<scenario>-<time>.json` (in SUMMARY_DIR when given): k6's summary data with the
 * run's record under `run`.
 */
export function summary(name: string) {
  return (data: SummaryData): Record<string, string> => {
    const run = runRecord(name, data);
    const lines = [`scenario ${name} against ${BASE_URL} (${run.seconds.toFixed(1)} s)`, ...generatorLines(data)];
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
            .filter(([t]) => !REPORTING_THRESHOLDS.includes(t))
            .map(([t, r]) => `${r.ok ? "ok" : "FAILED"} ${t}`)
            .join(", ")
        : "";
      lines.push(`  ${metric.padEnd(32)} ${shown}${th ? `   [${th}]` : ""}`);
    }
    const t = thresholdsOf(data);
    if (t.setup.length > 0)
      lines.push("  thresholds of the test setup (did the generator keep up):", ...t.setup.map((l) => `    ${l}`));
    if (t.gateway.length > 0) {
      const note = run.generator?.saturated ? ", measured by a generator that did not keep up" : "";
      lines.push(`  thresholds of the gateway${note}:`, ...t.gateway.map((l) => `    ${l}`));
    }
    const dir = __ENV.SUMMARY_DIR ? `${__ENV.SUMMARY_DIR.replace(/\/$/, "")}/` : "";
    const file = `${dir}${runFileName("summary", name, run.startedAt)}`;
    lines.push(`  run record: ${file}`);
    return { stdout: `${lines.join("\n")}\n`, [file]: JSON.stringify({ ...data, run }, null, 2) };
  };
}
