/**
 * The chaos suite's report. Every scenario ends with `recordScenario(...)` (after its audit); the
 * run's global teardown (test/global-setup.ts) prints one table of all of them:
 *
 *   scenario | faults injected | requests | oversells | lost purchases | 5xx
 *
 * Rows go to a JSON-lines file named by the global setup (`inject("chaosReportFile")`), so test
 * files running in different workers add to one report.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { inject } from "vitest";
import type { AuditReport } from "../../../src/audit/audit.js";

export interface ScenarioResult {
  scenario: string;
  /** What was done to the system, in words: "redis-server SIGKILLed and restarted x1". */
  faults: string;
  /** HTTP requests the scenario's clients sent. */
  requests: number;
  /** Seats sold twice, general admission sold past capacity, a fan past maxSeatsPerFan (from the audit). */
  oversells: number;
  /** Charged purchases with neither a ticket nor a refund, or left pending (from the audit). */
  lostPurchases: number;
  /** Answers with a 5xx status other than the 503 the contract allows for a dependency being down. */
  serverErrors: number;
  /** 503 answers (dependency down, honest and retryable); shown apart from the 5xx above. */
  unavailable?: number;
  notes?: string;
}

const OVERSELL_CHECKS = new Set([
  "seats_sold_once",
  "general_admission_bounds",
  "general_admission_sold",
  "fans_within_limit",
]);
const LOST_PURCHASE_CHECKS = new Set([
  "captured_charges_confirmed",
  "refunds_match_purchases",
  "confirmed_purchases_charged",
  "no_pending_purchases",
  "sold_seats_match_purchases",
]);

/** Oversells and lost purchases, counted from an audit report's failed checks. */
export function auditFigures(report: AuditReport): { oversells: number; lostPurchases: number } {
  let oversells = 0;
  let lostPurchases = 0;
  for (const check of report.checks) {
    if (check.status !== "fail") continue;
    if (OVERSELL_CHECKS.has(check.name)) oversells += check.offenderCount;
    if (LOST_PURCHASE_CHECKS.has(check.name)) lostPurchases += check.offenderCount;
  }
  return { oversells, lostPurchases };
}

export function recordScenario(result: ScenarioResult): void {
  appendFileSync(inject("chaosReportFile"), `${JSON.stringify(result)}\n`);
}

export function readReport(file: string): ScenarioResult[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as ScenarioResult);
}

export function formatReport(rows: readonly ScenarioResult[]): string {
  const header = ["scenario", "faults injected", "requests", "oversells", "lost purchases", "5xx", "503"];
  const body = rows.map((r) => [
    r.scenario,
    r.faults,
    r.requests.toLocaleString("en-US"),
    String(r.oversells),
    String(r.lostPurchases),
    String(r.serverErrors),
    String(r.unavailable ?? 0),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  const rule = `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`;
  const notes = rows.filter((r) => r.notes).map((r) => `- ${r.scenario}: ${r.notes}`);
  return [line(header), rule, ...body.map(line), ...(notes.length ? ["", ...notes] : [])].join("\n");
}
