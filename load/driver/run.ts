/**
 * The load driver's scenarios and runner: fans (and bots) as concurrent async journeys over
 * keep-alive sockets, against a gateway it starts itself or one at `baseUrl`. Every run ends with
 * the audit (when it can reach the stores) and Kendall's tau between queue positions and the
 * order in which fans saw `admitted`.
 */
import { Redis } from "ioredis";
import { type AuditReport, auditEvent } from "../../src/audit/audit.js";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { createInventory } from "../../src/inventory/index.js";
import { createSimulatedProvider } from "../../src/payments/simulated.js";
import { RUN_RECORD_KIND, type RunRecord } from "../run-record.js";
import { Client } from "./http.js";
import { type Stack, startStack } from "./stack.js";
import { kendallTau, type LatencySummary, summarize } from "./stats.js";
import { evaluateThresholds, type Threshold, type ThresholdResult } from "./thresholds.js";

export const SCENARIOS = ["spike", "hot-seat", "abandon", "bots", "soak"] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface RunOptions {
  scenario: ScenarioName;
  /** Fans in the run (soak: arrivals are rate x duration unless fans is given). */
  fans: number;
  /** Arrivals per second (bots: bot requests per second). */
  rate: number;
  /** Seconds: soak and bots run this long; every scenario stops its fans after duration + 120 s. */
  duration: number;
  baseUrl?: string;
  eventId?: string;
  adminToken?: string;
  /** Seats of the event the driver creates (default: about 0.8 per fan). */
  seats?: number;
  connections?: number;
  /** Seconds between the event's creation and its onSaleAt (the lottery pre-queue), default 3 + layout time. */
  onSaleDelaySeconds?: number;
  /** Longest wait between two status polls, whatever the gateway suggests (default 5 s). */
  maxPollSeconds?: number;
  /** A fan's time between hold and purchase, ms (default 300-800). */
  thinkMs?: number;
  /**
   * The operator's load-test token (the gateway's LOAD_TEST_TOKEN), sent on every request: the
   * per-IP limit lets the driver through, the per-fan one does not. The driver's own gateway
   * gets one of its own.
   */
  loadTestToken?: string;
  /** Pass/fail criteria (thresholds.ts), evaluated at the end. */
  thresholds?: readonly Threshold[];
  /** Stores the driver's own gateway uses (default: spawned ones). */
  redisUrl?: string;
  dynamoEndpoint?: string;
  progress?: (line: string) => void;
}

export interface EndpointRow extends LatencySummary {
  endpoint: string;
  /** Its route template (load/routes.ts). */
  route?: string;
  requests: number;
  errors: number;
  statuses: Record<string, number>;
}

export interface RunResult {
  scenario: ScenarioName;
  eventId: string;
  baseUrl: string;
  seconds: number;
  seatsTotal: number;
  fans: number;
  prequeued: number;
  admitted: number;
  holds: number;
  sales: number;
  seatsSold: number;
  conflicts: number;
  abandonedWaiting: number;
  released: number;
  lapsed: number;
  releasedSeatsResold: number;
  botRequests: number;
  botAccepted: number;
  admissionsPerSecond: number;
  holdsPerSecond: number;
  salesPerSecond: number;
  /** From onSaleAt to the purchase of the last seat; null when not sold out. */
  sellOutSeconds: number | null;
  /** Kendall's tau-b between queue positions and admission order; NaN with fewer than 2 admitted. */
  tau: number;
  endpoints: EndpointRow[];
  /** Each threshold given, met or not. */
  thresholds?: ThresholdResult[];
  /** When the fans started arriving (ISO). */
  startedAt: string;
  /** Whether the run carried a load-test token (its own gateway's rate limits on). */
  loadTestToken: boolean;
  stats?: unknown;
  audit?: { ok: boolean; failed: string[]; summary: string[] };
  /** With --base-url: the command that audits the event. */
  auditCommand?: string;
}

interface Section {
  id: string;
  rows: number;
  seatsPerRow: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function layoutFor(scenario: ScenarioName, seats: number): Section[] {
  const perRow = Math.min(50, Math.max(1, seats));
  const split = (prefix: string[], n: number): Section[] => {
    const perSection = Math.ceil(n / prefix.length / perRow) * perRow;
    let left = n;
    const out: Section[] = [];
    for (const id of prefix) {
      if (left <= 0) break;
      const take = Math.min(perSection, left);
      out.push({ id, rows: Math.ceil(take / perRow), seatsPerRow: Math.min(perRow, take) });
      left -= Math.ceil(take / perRow) * Math.min(perRow, take);
    }
    return out;
  };
  if (scenario === "hot-seat") {
    const front = Math.min(20, seats);
    return [{ id: "FRONT", rows: 1, seatsPerRow: front }, ...(seats > front ? split(["A"], seats - front) : [])];
  }
  return split(seats > 4000 ? ["A", "B", "C", "D"] : ["A"], seats);
}

function defaultSeats(o: RunOptions, fans: number): number {
  if (o.seats) return o.seats;
  if (o.scenario === "soak") return Math.max(20, fans * 2);
  return Math.max(10, Math.round(fans * 0.8));
}

export async function runScenario(o: RunOptions): Promise<RunResult> {
  const log = o.progress ?? (() => {});
  const stack: Stack | undefined = o.baseUrl
    ? undefined
    : await startStack({
        ...(o.redisUrl ? { redisUrl: o.redisUrl } : {}),
        ...(o.dynamoEndpoint ? { dynamoEndpoint: o.dynamoEndpoint } : {}),
      });
  const baseUrl = o.baseUrl ?? stack!.url;
  const adminToken = o.adminToken ?? stack?.adminToken;
  const loadTestToken = o.loadTestToken ?? stack?.loadTestToken;
  const fans = o.scenario === "soak" && !o.fans ? Math.ceil(o.rate * o.duration) : o.fans;
  const client = new Client(baseUrl, o.connections ?? 256, {
    ...(loadTestToken ? { headers: { "x-load-test-token": loadTestToken } } : {}),
  });
  try {
    const eventId = o.eventId ?? `load_${o.scenario.replace("-", "")}_${Date.now().toString(36)}`;
    let sections: Section[];
    let onSaleAt: number;
    let seatsTotal: number;
    if (adminToken && !(o.eventId && o.baseUrl && !o.adminToken)) {
      const seats = defaultSeats(o, fans);
      sections = layoutFor(o.scenario, seats);
      seatsTotal = sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0);
      onSaleAt = Date.now() + (o.onSaleDelaySeconds ?? 3 + seatsTotal / 2_500) * 1000;
      const put = await client.call("admin", "PUT", `/v1/admin/events/${eventId}`, {
        token: adminToken,
        json: {
          name: `load ${o.scenario}`,
          onSaleAt: new Date(onSaleAt).toISOString(),
          holdSeconds: o.scenario === "abandon" ? 20 : 120,
          maxSeatsPerFan: 4,
          sections: sections.map((s) => ({ ...s, tier: s.id === "FRONT" ? "Front" : "Floor", price: 10_000 })),
          generalAdmission: [],
          waitingRoom: {
            // high, but spread over ~10 s: admitting everyone at once would leave the admission
            // order to the poll timing and make the fairness figure meaningless
            admitPerSecond: Math.max(20, Math.ceil(fans / 10)),
            maxActive: Math.max(1_000, fans),
            sessionSeconds: 900,
          },
        },
        ok: [200, 201],
      });
      if (put.status !== 200 && put.status !== 201) {
        throw new Error(`event ${eventId} not created: ${put.status} ${JSON.stringify(put.body)}`);
      }
      if (Date.now() > onSaleAt) log(`note: the event was written after its onSaleAt; no pre-queue this run`);
    } else {
      const map = await client.call<{ sections: { id: string; total: number }[] }>(
        "seatmap",
        "GET",
        `/v1/events/${eventId}/seatmap`,
      );
      const room = await client.call<{ onSaleAt: string }>("waiting-room", "GET", `/v1/events/${eventId}/waiting-room`);
      if (map.status !== 200) throw new Error(`event ${eventId}: seat map answered ${map.status}`);
      sections = map.body.sections.map((s) => ({ id: s.id, rows: 1, seatsPerRow: s.total }));
      seatsTotal = map.body.sections.reduce((n, s) => n + s.total, 0);
      onSaleAt = Date.parse(room.body.onSaleAt);
    }

    const started = performance.now();
    const wallStart = Date.now();
    const hardStop = wallStart + (Math.max(o.duration, fans / o.rate) + 120) * 1000;
    const maxPoll = (o.maxPollSeconds ?? 5) * 1000;
    const c = {
      prequeued: 0,
      admitted: 0,
      holds: 0,
      sales: 0,
      seatsSold: 0,
      conflicts: 0,
      abandonedWaiting: 0,
      released: 0,
      lapsed: 0,
      botRequests: 0,
      botAccepted: 0,
    };
    const positions: number[] = [];
    const admissionSeq: number[] = [];
    const releasedSeats = new Set<string>();
    const soldSeats = new Set<string>();
    let releasedSeatsResold = 0;
    let soldOutAt: number | null = null;
    let firstAdmitAt: number | null = null;

    const ticker = setInterval(() => {
      const t = ((performance.now() - started) / 1000).toFixed(0).padStart(4);
      log(
        `${t}s  requests ${client.requests}  errors ${client.errors}  admitted ${c.admitted}  holds ${c.holds}  sales ${c.sales} (${c.seatsSold}/${seatsTotal} seats)  conflicts ${c.conflicts}${o.scenario === "bots" ? `  bot requests ${c.botRequests} accepted ${c.botAccepted}` : ""}`,
      );
    }, 1_000);

    const ev = `/v1/events/${eventId}`;
    const preferred =
      o.scenario === "hot-seat" ? ["FRONT", ...sections.filter((s) => s.id !== "FRONT").map((s) => s.id)] : null;

    const fan = async (i: number) => {
      const fanId = `fan-${i}`;
      const joined = await client.call<{ queueToken: string; status: string }>("join", "POST", `${ev}/queue`, {
        json: { fanId },
        ok: [200, 201],
      });
      if (joined.status !== 200 && joined.status !== 201) return;
      if (joined.body.status === "prequeue") c.prequeued++;
      const leaves = o.scenario === "abandon" && i % 3 === 0;
      const leaveAt = Date.now() + 200 + ((i * 7919) % 2_000);
      let access: string | undefined;
      while (!access) {
        if (Date.now() > hardStop) return;
        const s = await client.call<{
          status: string;
          position: number;
          pollAfterSeconds?: number;
          accessToken?: string;
        }>("status", "GET", `${ev}/queue/status`, { token: joined.body.queueToken });
        if (s.status === 200 && s.body.accessToken) {
          access = s.body.accessToken;
          positions.push(s.body.position);
          admissionSeq.push(c.admitted++);
          firstAdmitAt ??= Date.now();
          break;
        }
        if (s.status === 200 && s.body.status !== "waiting" && s.body.status !== "prequeue") return;
        if (leaves && Date.now() > leaveAt) {
          c.abandonedWaiting++;
          return;
        }
        const suggested = (s.body?.pollAfterSeconds ?? 1) * 1000;
        await sleep(Math.min(maxPoll, Math.max(100, suggested)) * (0.9 + Math.random() * 0.2));
      }

      const want = 1 + (i % 2);
      let held: { holdId: string; seats: string[] } | undefined;
      /** Seats this fan saw go to someone else (the cached map may still show them available). */
      const lost = new Set<string>();
      for (let attempt = 0; attempt < 8 && !held; attempt++) {
        if (Date.now() > hardStop) return;
        // hot-seat: the front row first; after two lost races, anywhere else
        const order =
          preferred && attempt < 3
            ? preferred
            : (preferred?.slice(1) ?? sections.map((s) => s.id)).sort(() => Math.random() - 0.5);
        let available: string[] = [];
        for (const sectionId of order) {
          // The compact form: [row, firstSeat, count] runs, one status character a seat.
          const page = await client.call<{ layout: [number, number, number][]; status: string }>(
            "section seats",
            "GET",
            `${ev}/sections/${sectionId}/seats?format=compact`,
          );
          available = [];
          let at = 0;
          for (const [row, first, count] of page.body?.layout ?? []) {
            for (let k = 0; k < count; k++, at++) {
              const id = `${sectionId}-${row}-${first + k}`;
              if (page.body?.status[at] === "a" && !lost.has(id)) available.push(id);
            }
          }
          if (available.length > 0) break;
        }
        if (available.length === 0) return; // sold out (as far as the cached map knows)
        const chosen =
          o.scenario === "hot-seat" && attempt < 3
            ? available.slice(0, want)
            : Array.from(
                new Set(Array.from({ length: want }, () => available[Math.floor(Math.random() * available.length)]!)),
              );
        const h = await client.call<{ holdId: string; seats: string[]; error?: { details?: { seats?: string[] } } }>(
          "hold",
          "POST",
          `${ev}/holds`,
          {
            token: access,
            json: { seats: chosen },
            ok: [201, 409],
          },
        );
        if (h.status === 201) {
          held = h.body;
          c.holds++;
        } else if (h.status === 409) {
          c.conflicts++;
          for (const s of h.body?.error?.details?.seats ?? chosen) lost.add(s);
          await sleep(50 + Math.random() * 200);
        } else await sleep(200);
      }
      if (!held) return;
      await sleep(o.thinkMs ?? 300 + Math.random() * 500);
      if (o.scenario === "abandon" && i % 5 === 1) {
        const r = await client.call("release", "DELETE", `${ev}/holds/${held.holdId}`, { token: access, ok: [204] });
        if (r.status === 204) {
          c.released++;
          for (const s of held.seats) releasedSeats.add(s);
        }
        return;
      }
      if (o.scenario === "abandon" && i % 5 === 2) {
        c.lapsed++; // walks away: the hold expires and the seats return to sale
        for (const s of held.seats) releasedSeats.add(s);
        return;
      }
      const p = await client.call<{ status: string; seats: string[] }>(
        "purchase",
        "POST",
        `${ev}/holds/${held.holdId}/purchase`,
        {
          token: access,
          json: { paymentToken: "tok_ok" },
          headers: { "idempotency-key": `load-${held.holdId}` },
          // 409 hold_expired: the fan took longer than holdSeconds (a slow gateway); not a gateway error
          ok: [201, 202, 409],
        },
      );
      if (p.status === 201 || p.status === 202) {
        c.sales++;
        for (const s of p.body.seats ?? held.seats) {
          soldSeats.add(s);
          if (releasedSeats.has(s)) releasedSeatsResold++;
        }
        c.seatsSold = soldSeats.size;
        if (c.seatsSold >= seatsTotal && soldOutAt === null) soldOutAt = Date.now();
      }
    };

    const bot = async (k: number) => {
      const refused = [401, 403, 404];
      const record = (status: number) => {
        c.botRequests++;
        if (status >= 200 && status < 300) c.botAccepted++;
      };
      const seatBody = { seats: [`${sections[0]?.id ?? "A"}-1-1`] };
      const kind = k % 6;
      if (kind === 0) {
        // skips the queue: no token at all
        record(
          (await client.call("bot: hold, no token", "POST", `${ev}/holds`, { json: seatBody, ok: refused })).status,
        );
        return;
      }
      const j = await client.call<{ queueToken: string }>("bot: join", "POST", `${ev}/queue`, {
        json: { fanId: `bot-${k}` },
        ok: [200, 201],
      });
      const qt = j.body?.queueToken ?? "x.y.z";
      const [h = "", payload = "", sig = ""] = qt.split(".");
      const forgedPayload = Buffer.from(JSON.stringify({ sub: `bot-${k}`, kind: "access", exp: 4102444800 })).toString(
        "base64url",
      );
      const tampered = `${h}.${forgedPayload}.${sig}`;
      const resigned = `${h}.${payload}.${Buffer.from(`forged-${k}-signature-bytes-000`).toString("base64url")}`;
      if (kind === 1) {
        // replays its queue token as an access token
        record(
          (
            await client.call("bot: hold, queue token", "POST", `${ev}/holds`, {
              token: qt,
              json: seatBody,
              ok: refused,
            })
          ).status,
        );
      } else if (kind === 2) {
        record(
          (
            await client.call("bot: hold, forged token", "POST", `${ev}/holds`, {
              token: tampered,
              json: seatBody,
              ok: refused,
            })
          ).status,
        );
      } else if (kind === 3) {
        record(
          (
            await client.call("bot: status, forged token", "GET", `${ev}/queue/status`, {
              token: resigned,
              ok: refused,
            })
          ).status,
        );
      } else if (kind === 4) {
        record(
          (
            await client.call("bot: admin, fan token", "GET", `/v1/admin/events/${eventId}/stats`, {
              token: qt,
              ok: refused,
            })
          ).status,
        );
      } else {
        // hammers the purchase endpoint of a made-up hold
        for (let n = 0; n < 5; n++) {
          record(
            (
              await client.call("bot: purchase, forged token", "POST", `${ev}/holds/h_bot${k}${n}/purchase`, {
                token: tampered,
                json: { paymentToken: "tok_ok" },
                headers: { "idempotency-key": `bot-${k}-${n}` },
                ok: refused,
              })
            ).status,
          );
        }
      }
    };

    // arrivals: fan i at i / rate seconds (soak: spread over duration)
    const arrivalRate = o.scenario === "soak" ? fans / o.duration : o.rate;
    const journeys: Promise<void>[] = [];
    const botLoop = async () => {
      if (o.scenario !== "bots") return;
      const end = Date.now() + o.duration * 1000;
      const bots: Promise<void>[] = [];
      for (let k = 0; Date.now() < end; k++) {
        bots.push(bot(k));
        await sleep(1000 / Math.max(1, o.rate));
      }
      await Promise.all(bots);
    };
    const botsDone = botLoop();
    const fanRate = o.scenario === "bots" ? Math.max(1, fans / Math.max(1, o.duration / 2)) : arrivalRate;
    for (let i = 0; i < fans; i++) {
      const due = wallStart + (i / fanRate) * 1000;
      if (due > Date.now() + 2) await sleep(due - Date.now());
      journeys.push(fan(i));
    }
    await Promise.all([...journeys, botsDone]);
    clearInterval(ticker);
    const seconds = (performance.now() - started) / 1000;

    const stats = adminToken
      ? (await client.call("admin", "GET", `/v1/admin/events/${eventId}/stats`, { token: adminToken })).body
      : undefined;

    const sinceOnSale = Math.max(0.001, (Date.now() - Math.max(onSaleAt, firstAdmitAt ?? onSaleAt)) / 1000);
    const endpoints: EndpointRow[] = [...client.endpoints.entries()].map(([endpoint, s]) => ({
      endpoint,
      ...(s.route ? { route: s.route } : {}),
      requests: s.requests,
      errors: s.errors,
      statuses: s.statuses,
      ...summarize(s.latencies),
    }));
    const result: RunResult = {
      scenario: o.scenario,
      eventId,
      baseUrl,
      seconds,
      seatsTotal,
      fans,
      ...c,
      releasedSeatsResold,
      admissionsPerSecond: c.admitted / sinceOnSale,
      holdsPerSecond: c.holds / sinceOnSale,
      salesPerSecond: c.sales / sinceOnSale,
      sellOutSeconds: soldOutAt === null ? null : (soldOutAt - onSaleAt) / 1000,
      tau: kendallTau(positions, admissionSeq),
      endpoints,
      startedAt: new Date(wallStart).toISOString(),
      loadTestToken: Boolean(loadTestToken),
      ...(stats !== undefined ? { stats } : {}),
    };

    if (o.thresholds?.length) {
      result.thresholds = evaluateThresholds(o.thresholds, {
        seconds,
        endpoints: client.endpoints,
        counters: {
          sales_confirmed: c.sales,
          fans_admitted: c.admitted,
          holds_granted: c.holds,
          hold_conflicts: c.conflicts,
          bot_requests_accepted: c.botAccepted,
        },
      });
    }
    if (stack) {
      result.audit = await runAudit(stack, eventId);
    } else {
      result.auditCommand = `DYNAMODB_ENDPOINT=<the gateway's> DYNAMODB_TABLE=<its table> REDIS_URL=<its redis> npm run audit -- --event ${eventId}`;
    }
    return result;
  } finally {
    client.close();
    await stack?.stop();
  }
}

async function runAudit(stack: Stack, eventId: string): Promise<NonNullable<RunResult["audit"]>> {
  const dynamo = createDynamoClient({ endpoint: stack.dynamoEndpoint, region: "us-east-1" });
  const redis = new Redis(stack.redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const report: AuditReport = await auditEvent(
      {
        inventory: createInventory({ client: dynamo, tableName: stack.table }),
        payments: createSimulatedProvider({ redis }),
      },
      eventId,
    );
    return {
      ok: report.ok,
      failed: report.checks.filter((x) => x.status === "fail").map((x) => `${x.title}: ${x.summary}`),
      summary: report.checks.map((x) => `${x.status.toUpperCase().padEnd(4)} ${x.title}: ${x.summary}`),
    };
  } finally {
    redis.disconnect();
    dynamo.destroy();
  }
}

const fmt = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a");

/** The end-of-run report, as text. */
export function renderResult(r: RunResult): string {
  const w = Math.max(8, ...r.endpoints.map((e) => e.endpoint.length));
  const lines = [
    "",
    `scenario ${r.scenario}, event ${r.eventId} at ${r.baseUrl}: ${r.fans} fans, ${r.seatsTotal} seats, ${fmt(r.seconds)} s`,
    "",
    `${"endpoint".padEnd(w)}  ${"requests".padStart(9)}  ${"errors".padStart(7)}  ${"p50 ms".padStart(8)}  ${"p95 ms".padStart(8)}  ${"p99 ms".padStart(8)}  statuses`,
    ...r.endpoints.map(
      (e) =>
        `${e.endpoint.padEnd(w)}  ${String(e.requests).padStart(9)}  ${String(e.errors).padStart(7)}  ${fmt(e.p50).padStart(8)}  ${fmt(e.p95).padStart(8)}  ${fmt(e.p99).padStart(8)}  ${JSON.stringify(e.statuses)}`,
    ),
    "",
    `admitted ${r.admitted} (${fmt(r.admissionsPerSecond)}/s; ${r.prequeued} joined the pre-queue)   holds ${r.holds} (${fmt(r.holdsPerSecond)}/s)   sales ${r.sales} (${fmt(r.salesPerSecond)}/s, ${r.seatsSold} seats)`,
    `conflicts (409) ${r.conflicts}   time to sell out ${r.sellOutSeconds === null ? "not sold out" : `${fmt(r.sellOutSeconds, 2)} s after onSaleAt`}`,
  ];
  if (r.scenario === "abandon") {
    lines.push(
      `abandoned while waiting ${r.abandonedWaiting}   holds released ${r.released}   holds left to expire ${r.lapsed}   released seats sold again ${r.releasedSeatsResold}`,
    );
  }
  if (r.scenario === "bots") lines.push(`bot requests ${r.botRequests}, accepted ${r.botAccepted} (must be 0)`);
  lines.push(`fairness: Kendall's tau (queue position vs admission order) = ${fmt(r.tau, 4)} (1.0 = strict FIFO)`);
  if (r.thresholds?.length) {
    lines.push("", "thresholds:");
    for (const t of r.thresholds) lines.push(`  ${t.ok ? "ok    " : "FAILED"} ${t.threshold}   (${fmt(t.actual, 4)})`);
  }
  if (r.audit) {
    lines.push("", `audit: ${r.audit.ok ? "PASS" : "FAIL"}`, ...r.audit.summary.map((s) => `  ${s}`));
  } else if (r.auditCommand) {
    lines.push("", `audit: run  ${r.auditCommand}`);
  }
  return `${lines.join("\n")}\n`;
}

/** The run's record (load/run-record.ts), for its file and `npm run load:compare`. */
export function toRunRecord(r: RunResult, settings: RunRecord["settings"] = {}): RunRecord {
  const requests = r.endpoints.reduce((n, e) => n + e.requests, 0);
  return {
    kind: RUN_RECORD_KIND,
    version: 1,
    tool: "driver",
    scenario: r.scenario,
    startedAt: r.startedAt,
    target: r.baseUrl,
    settings: { fans: r.fans, seats: r.seatsTotal, loadTestToken: r.loadTestToken, ...settings },
    seconds: r.seconds,
    requests,
    requestsPerSecond: requests / Math.max(r.seconds, 1e-9),
    errors: r.endpoints.reduce((n, e) => n + e.errors, 0),
    sales: r.sales,
    endpoints: r.endpoints.map((e) => ({
      endpoint: e.endpoint,
      ...(e.route ? { route: e.route } : {}),
      requests: e.requests,
      errors: e.errors,
      p50: e.p50,
      p95: e.p95,
      p99: e.p99,
    })),
  };
}
