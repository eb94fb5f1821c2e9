/**
 * The load driver's runner: plays any scenario (scenarios/*.ts, through the interface of
 * scenario.ts) against a gateway it starts itself or one at `baseUrl`: fans (and bots) as
 * concurrent async journeys over keep-alive sockets. Every run ends with the audit (when it can
 * reach the stores) and Kendall's tau between queue positions and the order in which fans saw
 * `admitted`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { connectRedis } from "../../src/redis/connect.js";
import { type AuditReport, auditEvent } from "../../src/audit/audit.js";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { createInventory } from "../../src/inventory/index.js";
import { createSimulatedProvider } from "../../src/payments/simulated.js";
import { RUN_RECORD_KIND, type RunRecord } from "../run-record.js";
import { costLines, IDLE_SECONDS, measureCosts, type RunCosts } from "./costs.js";
import { createEvent, type PlayedEvent, readEvent } from "./event.js";
import { RunFigures, type Tally } from "./figures.js";
import { type GeneratorFigures, GeneratorMonitor, generatorLines } from "./generator.js";
import { Client, targetUrls } from "./http.js";
import { fanJourney } from "./journey.js";
import type { FanRun, Scenario } from "./scenario.js";
import { SCENARIOS, type ScenarioName } from "./scenarios/index.js";
import { type Stack, startStack } from "./stack.js";
import { kendallTau, type LatencySummary, outOfOrder, summarize } from "./stats.js";
import {
  evaluateThresholds,
  GENERATOR_SATURATED_EXIT_CODE,
  parseThreshold,
  type Threshold,
  type ThresholdResult,
} from "./thresholds.js";

export type { ScenarioName };

export interface RunOptions {
  scenario: ScenarioName;
  /** Fans in the run (soak: arrivals are rate x duration unless fans is given). */
  fans: number;
  /** Arrivals per second (bots: bot requests per second). */
  rate: number;
  /** Seconds: soak and bots run this long; every scenario stops its fans after duration + 120 s. */
  duration: number;
  /** The gateway, or several gateways comma-separated (each request goes to the next in turn). */
  baseUrl?: string;
  eventId?: string;
  adminToken?: string;
  /** Seats of the event the driver creates (default: about 0.8 per fan). */
  seats?: number;
  connections?: number;
  /** Seconds between the event's creation and its onSaleAt (the lottery pre-queue), default 3 + layout time. */
  onSaleDelaySeconds?: number;
  /**
   * Longest wait between two status polls, seconds, whatever the gateway suggests (default: no
   * cap, the fan page's wait, up to 30 s far back in the line); for short test runs.
   */
  maxPollSeconds?: number;
  /**
   * Poll by `pollAfterSeconds` with the jitter, ignoring `pollAfterMs`: as a client that predates
   * polls scheduled on the ETA does, for a before/after comparison in one build.
   */
  coarsePolls?: boolean;
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
  /** Its own gateway on a Redis Cluster: `true` starts a local one (3 masters); a string: seed nodes. */
  redisCluster?: boolean | string;
  dynamoEndpoint?: string;
  /** Gateway processes of its own (default 1), sharing its stores; requests go to each in turn. */
  gateways?: number;
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

export interface RunResult extends Tally {
  scenario: ScenarioName;
  eventId: string;
  baseUrl: string;
  seconds: number;
  seatsTotal: number;
  fans: number;
  admissionsPerSecond: number;
  holdsPerSecond: number;
  salesPerSecond: number;
  /** From onSaleAt to the purchase of the last seat; null when not sold out. */
  sellOutSeconds: number | null;
  /** Kendall's tau-b between queue positions and admission order; NaN with fewer than 2 admitted. */
  tau: number;
  /**
   * Kendall's tau-b between queue positions and the line's decisions (the status `admittedAt`): the
   * line's own order, apart from how long the answers took to reach the fans. NaN without them.
   */
  tauDecided: number;
  /**
   * The fans the line decided to admit before some fan ahead of them (by `admittedAt`, strictly
   * earlier): 0 when the line kept its order. Of `decided`, the admitted whose answer carried it.
   */
  decidedOutOfOrder: number;
  decided: number;
  /** Milliseconds from the line's decision to admit a fan to the fan's seeing it (status `admittedAt`). */
  admissionDelayMs: LatencySummary;
  /** The part of it before the fan's poll was sent (the rest is the answer's time). */
  admissionAskDelayMs: LatencySummary;
  /** Status polls sent per fan who joined (every answer counted, refusals too). */
  pollsPerFan: number;
  endpoints: EndpointRow[];
  /** Each threshold given, met or not. */
  thresholds?: ThresholdResult[];
  /** When the fans started arriving (ISO). */
  startedAt: string;
  /** Whether the run carried a load-test token (its own gateway's rate limits on). */
  loadTestToken: boolean;
  stats?: unknown;
  /** `stranded`: single seats left alone between taken ones (the audit's figure, not a check). */
  audit?: { ok: boolean; failed: string[]; summary: string[]; stranded: number };
  /** With several base URLs: the requests each was sent, in the order given. */
  targets?: Array<{ url: string; requests: number }>;
  /** With the driver's own gateway: the CPU it, Redis and the driver spent, per request (costs.ts). */
  costs?: RunCosts;
  /**
   * The driver itself over the fans' window (generator.ts): its CPU, its event loop's delay, its
   * late arrivals, and whether it was saturated (then the figures are the generator's).
   */
  generator: GeneratorFigures;
  /** With --base-url: the command that audits the event. */
  auditCommand?: string;
}

/** The run's own gateway, unless it plays against `baseUrl`. */
function startOwnStack(o: RunOptions): Promise<Stack> | undefined {
  if (o.baseUrl) return undefined;
  return startStack({
    ...(o.redisUrl ? { redisUrl: o.redisUrl } : {}),
    ...(o.redisCluster ? { redisCluster: o.redisCluster } : {}),
    ...(o.dynamoEndpoint ? { dynamoEndpoint: o.dynamoEndpoint } : {}),
    ...(o.gateways ? { gateways: o.gateways } : {}),
  });
}

/** Where the run plays: its own gateway's, or the options'. */
interface Target {
  client: Client;
  baseUrl: string;
  adminToken: string | undefined;
  loadTestToken: string | undefined;
}

/** The event the run plays on: a fresh one with an operator token; an --event given without one, as it is. */
function eventFor(scenario: Scenario, o: RunOptions, target: Target, eventId: string, fans: number) {
  const { client, adminToken } = target;
  if (!adminToken || (o.eventId && o.baseUrl && !o.adminToken)) return readEvent(client, eventId);
  return createEvent(
    client,
    {
      eventId,
      name: `load ${o.scenario}`,
      adminToken,
      plan: scenario.setup(o, fans),
      fans,
      ...(o.onSaleDelaySeconds !== undefined ? { onSaleDelaySeconds: o.onSaleDelaySeconds } : {}),
      // With its own stack the driver measures the idle CPU before the first fan (costs.ts): the
      // on-sale waits for that too, or the first fans arrive after it and nobody is pre-queued.
      ...(o.baseUrl ? {} : { waitSeconds: IDLE_SECONDS }),
    },
    o.progress ?? (() => {}),
  );
}

/**
 * The fans, arriving `perSecond` from now, and what the scenario runs beside them, with a progress
 * line a second; until all are done. Its seconds, and what the driver measured of itself meanwhile.
 */
async function play(
  scenario: Scenario,
  run: FanRun,
  o: RunOptions,
  fans: number,
  perSecond: number,
): Promise<{ seconds: number; generator: GeneratorFigures }> {
  const started = performance.now();
  const elapsed = () => (performance.now() - started) / 1000;
  const ticker = setInterval(() => o.progress?.(progressLine(scenario, run, elapsed())), 1_000);
  const requestsBefore = run.client.requests;
  const timeoutsBefore = run.client.clientTimeouts;
  const monitor = new GeneratorMonitor(fans);
  try {
    const wallStart = Date.now();
    const beside = scenario.beside?.(run, o) ?? Promise.resolve();
    const journeys: Promise<void>[] = [];
    for (let i = 0; i < fans; i++) {
      const due = wallStart + (i / perSecond) * 1000;
      if (due > Date.now() + 2) await sleep(due - Date.now());
      // A busy loop wakes late and starts the fans due meanwhile in a burst: how late, is the generator's.
      monitor.arrived(Date.now() - due);
      journeys.push(fanJourney(run, i, scenario.fan));
    }
    await Promise.all([...journeys, beside]);
    const generator = monitor.stop(run.client.requests - requestsBefore, run.client.clientTimeouts - timeoutsBefore);
    return { seconds: elapsed(), generator };
  } finally {
    clearInterval(ticker);
  }
}

function progressLine(scenario: Scenario, { client, figures }: FanRun, seconds: number): string {
  const t = figures.tally;
  return `${seconds.toFixed(0).padStart(4)}s  requests ${client.requests}  errors ${client.errors}  admitted ${t.admitted}  holds ${t.holds}  sales ${t.sales} (${t.seatsSold}/${figures.seatsTotal} seats)  conflicts ${t.conflicts}${scenario.report?.progress?.(t) ?? ""}`;
}

function endpointRows(client: Client): EndpointRow[] {
  return [...client.endpoints.entries()].map(([endpoint, s]) => ({
    endpoint,
    ...(s.route ? { route: s.route } : {}),
    requests: s.requests,
    errors: s.errors,
    statuses: s.statuses,
    ...summarize(s.latencies),
  }));
}

/** The scenario's own thresholds and the options', measured on the run; undefined when there are none. */
function thresholdsOf(
  scenario: Scenario,
  o: RunOptions,
  run: FanRun,
  seconds: number,
  fans: number,
): ThresholdResult[] | undefined {
  const thresholds = [
    ...(scenario.thresholds ?? []).map(parseThreshold),
    ...(scenario.mustHold?.(fans) ?? []).map(parseThreshold),
    ...(o.thresholds ?? []),
  ];
  if (thresholds.length === 0) return undefined;
  const t = run.figures.tally;
  return evaluateThresholds(thresholds, {
    seconds,
    endpoints: run.client.endpoints,
    counters: {
      sales_confirmed: t.sales,
      fans_admitted: t.admitted,
      holds_granted: t.holds,
      hold_conflicts: t.conflicts,
      bot_requests_accepted: t.botAccepted,
    },
  });
}

/** The run's figures once every fan is done. */
function pollsPerFan(rows: readonly EndpointRow[], fans: number): number {
  const polls = rows.filter((e) => e.endpoint === "status").reduce((n, e) => n + e.requests, 0);
  return fans > 0 ? polls / fans : 0;
}

function resultOf(
  o: RunOptions,
  target: Target,
  run: FanRun,
  event: PlayedEvent,
  played: { fans: number; seconds: number; startedAt: string; stats: unknown; generator: GeneratorFigures },
): RunResult {
  const { figures } = run;
  const t = figures.tally;
  const { onSaleAt } = event;
  const sinceOnSale = Math.max(0.001, (Date.now() - Math.max(onSaleAt, figures.firstAdmitAt ?? onSaleAt)) / 1000);
  return {
    scenario: o.scenario,
    eventId: run.eventId,
    baseUrl: target.baseUrl,
    seconds: played.seconds,
    seatsTotal: event.seatsTotal,
    fans: played.fans,
    ...t,
    admissionsPerSecond: t.admitted / sinceOnSale,
    holdsPerSecond: t.holds / sinceOnSale,
    salesPerSecond: t.sales / sinceOnSale,
    sellOutSeconds: figures.soldOutAt === null ? null : (figures.soldOutAt - onSaleAt) / 1000,
    tau: kendallTau(figures.positions, figures.admissionOrder),
    tauDecided: kendallTau(figures.decidedPositions, figures.decidedAt),
    decidedOutOfOrder: outOfOrder(figures.decidedPositions, figures.decidedAt),
    decided: figures.decidedAt.length,
    admissionDelayMs: summarize(figures.admissionDelaysMs),
    admissionAskDelayMs: summarize(figures.admissionAskDelaysMs),
    pollsPerFan: pollsPerFan(endpointRows(run.client), played.fans),
    endpoints: endpointRows(run.client),
    startedAt: played.startedAt,
    loadTestToken: Boolean(target.loadTestToken),
    ...(played.stats !== undefined ? { stats: played.stats } : {}),
    generator: played.generator,
  };
}

export async function runScenario(o: RunOptions): Promise<RunResult> {
  const scenario = SCENARIOS[o.scenario];
  const stack = await startOwnStack(o);
  const baseUrl = o.baseUrl ?? stack!.url;
  const loadTestToken = o.loadTestToken ?? stack?.loadTestToken;
  const target: Target = {
    client: new Client(baseUrl, o.connections ?? 256, {
      ...(loadTestToken ? { headers: { "x-load-test-token": loadTestToken } } : {}),
    }),
    baseUrl,
    adminToken: o.adminToken ?? stack?.adminToken,
    loadTestToken,
  };
  const { client, adminToken } = target;
  const { fans, perSecond } = scenario.arrivals(o);
  try {
    const eventId = o.eventId ?? `load_${o.scenario.replace("-", "")}_${Date.now().toString(36)}`;
    const event = await eventFor(scenario, o, target, eventId, fans);
    const startedAt = new Date().toISOString();
    const run: FanRun = {
      client,
      eventId,
      sections: event.sections,
      figures: new RunFigures(event.seatsTotal),
      hardStop: Date.now() + (Math.max(o.duration, fans / o.rate) + 120) * 1000,
      ...(o.maxPollSeconds !== undefined ? { maxPollSeconds: o.maxPollSeconds } : {}),
      ...(o.coarsePolls ? { coarsePolls: true } : {}),
      ...(o.thinkMs !== undefined ? { thinkMs: o.thinkMs } : {}),
    };
    const costs = stack ? await measureCosts(stack) : undefined;
    const requestsBefore = client.requests;
    const { seconds, generator } = await play(scenario, run, o, fans, perSecond);
    const spent = await costs?.stop(client.requests - requestsBefore);
    const stats = adminToken
      ? (await client.call("admin", "GET", `/v1/admin/events/${eventId}/stats`, { token: adminToken })).body
      : undefined;
    const result = resultOf(o, target, run, event, { fans, seconds, startedAt, stats, generator });
    if (spent) result.costs = spent;
    const thresholds = thresholdsOf(scenario, o, run, seconds, fans);
    if (thresholds) result.thresholds = thresholds;
    const urls = targetUrls(baseUrl);
    if (urls.length > 1) result.targets = urls.map((url, i) => ({ url, requests: client.perTarget[i] ?? 0 }));
    if (stack) result.audit = await runAudit(stack, eventId);
    else {
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
  const redis = connectRedis(stack.redis, "commands", { maxRetriesPerRequest: 1 });
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
      stranded: report.stranded.count,
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
    // First, before any figure it puts in doubt.
    ...(r.generator?.saturated ? ["", ...generatorLines(r.generator)] : []),
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
  if (r.targets) lines.push(`requests per gateway: ${r.targets.map((t) => `${t.url} ${t.requests}`).join(", ")}`);
  lines.push(...(SCENARIOS[r.scenario].report?.lines?.(r) ?? []));
  lines.push(`fairness: Kendall's tau (queue position vs admission order) = ${fmt(r.tau, 4)} (1.0 = strict FIFO)`);
  if (r.decided > 1) {
    lines.push(
      `  the line's own order (position vs its decision, admittedAt): ${r.decidedOutOfOrder} of ${r.decided} admitted before a fan ahead of them; tau ${fmt(r.tauDecided, 4)} (a batch decided in one ms ties, so below 1 even in order)`,
    );
  }
  if (r.admissionDelayMs.count > 0) {
    const d = r.admissionDelayMs;
    lines.push(
      `admission seen after the decision: p50 ${fmt(d.p50)} ms, p95 ${fmt(d.p95)} ms, max ${fmt(d.max)} ms   status polls per fan ${fmt(r.pollsPerFan, 2)}`,
    );
    const a = r.admissionAskDelayMs;
    if (a?.count) {
      lines.push(
        `  of it before the fan asked: p50 ${fmt(a.p50)} ms, p95 ${fmt(a.p95)} ms, max ${fmt(a.max)} ms (the rest is the answer's time)`,
      );
    }
  }
  if (r.costs) lines.push(...costLines(r.costs, r.seconds));
  if (r.generator && !r.generator.saturated) lines.push(...generatorLines(r.generator));
  if (r.thresholds?.length) {
    const setupFailure = r.generator?.saturated && r.thresholds.some((t) => !t.ok);
    lines.push(
      "",
      setupFailure
        ? `thresholds: missed while the generator was saturated, a failure of the test setup, not the gateway's (exit ${GENERATOR_SATURATED_EXIT_CODE}):`
        : "thresholds:",
    );
    for (const t of r.thresholds) lines.push(`  ${t.ok ? "ok    " : "FAILED"} ${t.threshold}   (${fmt(t.actual, 4)})`);
  }
  const limited = r.endpoints.reduce((n, e) => n + (e.statuses["429"] ?? 0), 0);
  if (limited > 0 && !r.loadTestToken) {
    lines.push(
      "",
      `${limited} answers were 429 rate_limited: the gateway's per-IP limits saw every fan of this run as one ` +
        "client. Start it with LOAD_TEST_TOKEN=<token> and pass --load-test-token <token> (load/README.md).",
    );
  }
  if (r.audit) {
    lines.push(
      "",
      `audit: ${r.audit.ok ? "PASS" : "FAIL"}`,
      ...r.audit.summary.map((s) => `  ${s}`),
      `  single seats stranded between taken ones: ${r.audit.stranded}`,
    );
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
    generator: {
      saturated: r.generator.saturated,
      reasons: r.generator.reasons,
      cpuCores: r.generator.cpuCores,
      cpuMicrosPerRequest: r.generator.cpuMicrosPerRequest,
      cpuMicrosPerFan: r.generator.cpuMicrosPerFan,
      eventLoopDelayP99Ms: r.generator.eventLoopDelayMs.p99,
      lateArrivals: r.generator.arrivals.late,
      plannedArrivals: r.generator.arrivals.planned,
      clientTimeouts: r.generator.clientTimeouts,
      ...(r.generator.machine ? { machineBusyShare: r.generator.machine.busyShare } : {}),
    },
  };
}
