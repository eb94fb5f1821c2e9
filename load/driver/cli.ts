/**
 * `npm run load -- <scenario> [--fans N] [--rate R] [--duration S] [--base-url URL] [--event ID]
 *  [--admin-token T] [--seats N] [--connections N] [--json]`
 *
 * scenarios: spike, hot-seat, abandon, bots, soak. Without --base-url it starts its own gateway
 * (redis-server, local DynamoDB, src/main.ts) and audits the event at the end. Exit 1 when the
 * audit fails or a bot request was accepted.
 */
import { parseArgs } from "node:util";
import { renderResult, runScenario, SCENARIOS, type ScenarioName } from "./run.js";

export const USAGE = `usage: npm run load -- <${SCENARIOS.join("|")}> [--fans N] [--rate R] [--duration S] [--base-url URL]
       [--event ID] [--admin-token T] [--seats N] [--connections N] [--json]`;

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
    seats: { type: "string" },
    connections: { type: "string" },
    json: { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
});

const scenario = positionals[0] as ScenarioName | undefined;
if (values.help || !scenario || !SCENARIOS.includes(scenario)) {
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
const defaults: Record<ScenarioName, { fans: number; rate: number; duration: number }> = {
  spike: { fans: 2_000, rate: 1_000, duration: 30 },
  "hot-seat": { fans: 1_000, rate: 500, duration: 30 },
  abandon: { fans: 1_000, rate: 200, duration: 30 },
  bots: { fans: 200, rate: 100, duration: 20 },
  soak: { fans: 0, rate: 20, duration: 300 },
};
const d = defaults[scenario];

const result = await runScenario({
  scenario,
  fans: values.fans ? num(values.fans, d.fans) : d.fans,
  rate: num(values.rate, d.rate),
  duration: num(values.duration, d.duration),
  ...(values["base-url"] ? { baseUrl: values["base-url"] } : {}),
  ...(values.event ? { eventId: values.event } : {}),
  ...(values["admin-token"] ? { adminToken: values["admin-token"] } : {}),
  ...(values.seats ? { seats: num(values.seats, 0) } : {}),
  ...(values.connections ? { connections: num(values.connections, 256) } : {}),
  progress: (line) => process.stdout.write(`${line}\n`),
});
process.stdout.write(values.json ? `${JSON.stringify(result)}\n` : renderResult(result));
process.exitCode = (result.audit && !result.audit.ok) || result.botAccepted > 0 ? 1 : 0;
