/**
 * `npm run load -- <scenario> [--fans N] [--rate R] [--duration S] [--base-url URL] [--event ID]
 *  [--admin-token T] [--load-test-token T] [--seats N] [--connections N] [--max-poll S] [--coarse-polls]
 *  [--threshold EXPR]... [--out DIR] [--json] [--redis-cluster | --redis-cluster-nodes HOST:PORT,...] [--gateways N]`
 *
 * scenarios: spike, hot-seat, abandon, bots, soak, best (scenarios/*.ts). --base-url takes several gateways,
 * comma-separated (each request goes to the next in turn). Without --base-url it starts its own gateway
 * (redis-server, local DynamoDB, src/main.ts; `--gateways N`: N of them on the same stores, each request
 * to the next in turn, as several --base-url) and audits the event at the end. `--redis-cluster`
 * puts that gateway on a local Redis Cluster of 3 masters started for the run;
 * `--redis-cluster-nodes` on the cluster whose seed nodes are given (REDIS_CLUSTER_NODES). Each run's record
 * goes to its own file, <out>/load-<scenario>-<time>.json. Exit 1 when the audit fails or a bot
 * request was accepted, 3 when a threshold failed while the driver itself was saturated (a failure
 * of the test setup: generator.ts), 99 when a threshold failed (as k6), else 0.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runFileName } from "../run-record.js";
import { renderResult, runScenario, toRunRecord } from "./run.js";
import { isScenarioName, SCENARIO_NAMES, SCENARIOS } from "./scenarios/index.js";
import { MAX_OWN_GATEWAYS } from "./stack.js";
import { exitCodeFor, parseThreshold, type Threshold } from "./thresholds.js";

export const USAGE = `usage: npm run load -- <${SCENARIO_NAMES.join("|")}> [--fans N] [--rate R] [--duration S] [--base-url URL[,URL...]]
       [--event ID] [--admin-token T] [--load-test-token T] [--seats N] [--connections N] [--max-poll S] [--coarse-polls]
       [--pow-bits N (bots: the join's proof-of-work cost; default 10, 0 off)]
       [--threshold 'http_req_failed<0.01'] [--threshold 'p(99)<500'] ... [--out DIR] [--json]
       [--redis-cluster | --redis-cluster-nodes host:port,...] [--gateways N (its own gateways, 1 to 8)]`;

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  allowPositionals: true,
  options: {
    fans: { type: "string" },
    rate: { type: "string" },
    duration: { type: "string" },
    "base-url": { type: "string" },
    event: { type: "string" },
    "admin-token": { type: "string" },
    "load-test-token": { type: "string" },
    threshold: { type: "string", multiple: true },
    out: { type: "string", default: "load-results" },
    seats: { type: "string" },
    "pow-bits": { type: "string" },
    connections: { type: "string" },
    "max-poll": { type: "string" },
    "coarse-polls": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
    "redis-cluster": { type: "boolean", default: false },
    "redis-cluster-nodes": { type: "string" },
    gateways: { type: "string" },
    help: { type: "boolean", default: false },
  },
});

const scenario = positionals[0];
if (values.help || scenario === undefined || !isScenarioName(scenario)) {
  process.stderr.write(`${USAGE}\n`);
  process.exit(values.help ? 0 : 2);
}
const num = (v: string | undefined, d: number) => {
  const n = v === undefined ? d : Number(v);
  if (!Number.isFinite(n) || n <= 0) {
    process.stderr.write(`bad number: ${v}\n${USAGE}\n`);
    process.exit(2);
  }
  return n;
};
const d = SCENARIOS[scenario].defaults;
let thresholds: Threshold[];
try {
  thresholds = (values.threshold ?? []).map(parseThreshold);
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
  process.exit(2);
}

if (values["redis-cluster"] && values["redis-cluster-nodes"]) {
  process.stderr.write(`--redis-cluster starts a cluster, --redis-cluster-nodes names one: not both\n${USAGE}\n`);
  process.exit(2);
}
if ((values["redis-cluster"] || values["redis-cluster-nodes"]) && values["base-url"]) {
  process.stderr.write(`--redis-cluster is for the driver's own gateway, not with --base-url\n${USAGE}\n`);
  process.exit(2);
}

if (values.gateways !== undefined && values["base-url"]) {
  process.stderr.write(`--gateways is for the driver's own gateways, not with --base-url\n${USAGE}\n`);
  process.exit(2);
}
const gatewayCount = values.gateways === undefined ? 1 : num(values.gateways, 1);
if (!Number.isInteger(gatewayCount) || gatewayCount > MAX_OWN_GATEWAYS) {
  process.stderr.write(`--gateways: 1 to ${MAX_OWN_GATEWAYS}\n${USAGE}\n`);
  process.exit(2);
}

const result = await runScenario({
  scenario,
  fans: values.fans ? num(values.fans, d.fans) : d.fans,
  rate: num(values.rate, d.rate),
  duration: num(values.duration, d.duration),
  ...(values["base-url"] ? { baseUrl: values["base-url"] } : {}),
  ...(values.event ? { eventId: values.event } : {}),
  ...(values["admin-token"] ? { adminToken: values["admin-token"] } : {}),
  ...(values["load-test-token"] ? { loadTestToken: values["load-test-token"] } : {}),
  thresholds,
  ...(values.seats ? { seats: num(values.seats, 0) } : {}),
  ...(values["pow-bits"] !== undefined
    ? { powBits: Math.max(0, Math.min(26, Math.floor(Number(values["pow-bits"]) || 0))) }
    : {}),
  ...(values.connections ? { connections: num(values.connections, 256) } : {}),
  ...(values["max-poll"] ? { maxPollSeconds: num(values["max-poll"], 0) } : {}),
  ...(values["coarse-polls"] ? { coarsePolls: true } : {}),
  ...(values["redis-cluster"] ? { redisCluster: true } : {}),
  ...(values["redis-cluster-nodes"] ? { redisCluster: values["redis-cluster-nodes"] } : {}),
  ...(gatewayCount > 1 ? { gateways: gatewayCount } : {}),
  progress: (line) => process.stdout.write(`${line}\n`),
});
const run = toRunRecord(result, {
  rate: num(values.rate, d.rate),
  duration: num(values.duration, d.duration),
  connections: values.connections ? num(values.connections, 256) : 256,
  event: values.event ?? null,
  maxPoll: values["max-poll"] ? num(values["max-poll"], 0) : null,
  coarsePolls: values["coarse-polls"] ?? false,
  thresholds: (values.threshold ?? []).join(" ; ") || null,
});
mkdirSync(values.out, { recursive: true });
const file = join(values.out, runFileName("load", scenario, result.startedAt));
writeFileSync(file, `${JSON.stringify({ run, result }, null, 2)}\n`);
process.stdout.write(values.json ? `${JSON.stringify(result)}\n` : `${renderResult(result)}\nrun record: ${file}\n`);
process.exitCode = exitCodeFor(result);
