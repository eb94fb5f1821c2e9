/**
 * `npm run load:compare -- a.json b.json`: two load runs side by side (a k6 summary file or a
 * driver run file, any mix): throughput, errors, sales, and p50/p95/p99 per endpoint, with b/a.
 * Exit 2 when a file is not a run record.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type EndpointFigures, RUN_RECORD_KIND, type RunRecord } from "./run-record.js";

/** The run record in a file: `run` of a k6 summary or a driver run file, or the record itself. */
export function readRunRecord(path: string): RunRecord {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
  const candidate = (parsed as { run?: unknown })?.run ?? parsed;
  if ((candidate as { kind?: unknown })?.kind !== RUN_RECORD_KIND) {
    throw new Error(`${path}: not a load run record (a summary-*.json of k6 or a load-*.json of npm run load)`);
  }
  return candidate as RunRecord;
}

const num = (n: number | undefined, d = 1) => (n === undefined || !Number.isFinite(n) ? "-" : n.toFixed(d));
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || a === 0
    ? "-"
    : `${(b / a).toFixed(2)}x`;

/** The side-by-side table, as text. */
export function compareRuns(a: RunRecord, b: RunRecord, files: [string, string] = ["", ""]): string {
  const rows: string[][] = [];
  const row = (label: string, x: number | undefined, y: number | undefined, d = 1) =>
    rows.push([label, num(x, d), num(y, d), ratio(x, y)]);
  row("requests/s", a.requestsPerSecond, b.requestsPerSecond);
  row("requests", a.requests, b.requests, 0);
  row("errors", a.errors, b.errors, 0);
  row("error rate %", (a.errors / Math.max(1, a.requests)) * 100, (b.errors / Math.max(1, b.requests)) * 100, 2);
  row("sales", a.sales, b.sales, 0);
  row("seconds", a.seconds, b.seconds);
  if (a.generator || b.generator) {
    // The generator's own figures: a run whose generator was saturated measured the generator.
    row("generator CPU, cores", a.generator?.cpuCores, b.generator?.cpuCores, 2);
    row("generator µs/request", a.generator?.cpuMicrosPerRequest, b.generator?.cpuMicrosPerRequest, 0);
    row("dropped iterations", a.generator?.droppedIterations, b.generator?.droppedIterations, 0);
    row("client timeouts", a.generator?.clientTimeouts, b.generator?.clientTimeouts, 0);
  }
  const byName = (r: RunRecord) => new Map(r.endpoints.map((e) => [e.endpoint, e]));
  const ea = byName(a);
  const eb = byName(b);
  const endpoints = [...new Set([...ea.keys(), ...eb.keys()])];
  for (const name of endpoints) {
    const x: EndpointFigures | undefined = ea.get(name);
    const y: EndpointFigures | undefined = eb.get(name);
    rows.push([`${name}`, "", "", ""]);
    row("  requests", x?.requests, y?.requests, 0);
    row("  errors", x?.errors, y?.errors, 0);
    row("  p50 ms", x?.p50, y?.p50);
    row("  p95 ms", x?.p95, y?.p95);
    row("  p99 ms", x?.p99, y?.p99);
  }
  const header = ["", "a", "b", "b/a"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join("   ")
      .trimEnd();
  const describe = (label: string, file: string, r: RunRecord) =>
    `${label}${file ? ` = ${file}` : ""}: ${r.tool} ${r.scenario} at ${r.target}, ${r.startedAt}, ${Object.entries(
      r.settings,
    )
      .map(([k, v]) => `${k}=${v}`)
      .join(" ")}${
      r.generator?.saturated
        ? `\n  GENERATOR SATURATED: its figures measure the load generator, not the gateway (${r.generator.reasons.join("; ")})`
        : ""
    }`;
  return `${[describe("a", files[0], a), describe("b", files[1], b), "", line(header), ...rows.map(line)].join("\n")}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [fa, fb] = process.argv.slice(2);
  if (!fa || !fb) {
    process.stderr.write("usage: npm run load:compare -- a.json b.json\n");
    process.exit(2);
  }
  try {
    process.stdout.write(compareRuns(readRunRecord(fa), readRunRecord(fb), [fa, fb]));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
}
