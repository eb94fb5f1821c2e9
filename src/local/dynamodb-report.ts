/**
 * The local DynamoDB's per-partition report (docs/local-dynamodb.md): what each partition (table or
 * index, partition key value) drew, its peak units in any one second against its limit, and the
 * requests it throttled or cancelled for a conflict. Counted in aws mode only.
 *
 * It is a target of its own on the DynamoDB endpoint (`X-Amz-Target: DynamoDB_20120810.LocalReport`),
 * asked with a plain POST: the local DynamoDB checks no signature for it.
 */
import { z } from "zod";

export const LOCAL_REPORT_TARGET = "DynamoDB_20120810.LocalReport";

const partitionSchema = z.object({
  table: z.string(),
  /** null: the table itself. */
  index: z.string().nullable(),
  partitionKey: z.string(),
  readUnits: z.number(),
  writeUnits: z.number(),
  peakReadUnitsPerSecond: z.number(),
  peakWriteUnitsPerSecond: z.number(),
  throttledRequests: z.number(),
  conflicts: z.number(),
});

const reportSchema = z.object({
  mode: z.enum(["default", "aws"]),
  since: z.string(),
  until: z.string(),
  limits: z.object({ readUnitsPerSecond: z.number(), writeUnitsPerSecond: z.number() }),
  transactionMs: z.number(),
  /** Items in flight at the time of the report, in a TransactWriteItems and in a single write. */
  inFlight: z.object({ transactionItems: z.number(), writeItems: z.number() }),
  partitions: z.array(partitionSchema),
  totals: z.object({
    readUnits: z.number(),
    writeUnits: z.number(),
    throttledRequests: z.number(),
    conflicts: z.number(),
    partitions: z.number(),
  }),
});

export type PartitionReport = z.infer<typeof partitionSchema>;
export type LocalDynamoReport = z.infer<typeof reportSchema>;

export class LocalReportError extends Error {
  override readonly name = "LocalReportError";
}

/**
 * Fetches the report from a local DynamoDB endpoint; `reset` starts the counting afresh once it is
 * answered (so consecutive runs each see their own figures). Rejects with LocalReportError when the
 * endpoint does not answer with a report (real DynamoDB, an unpatched dynalite).
 */
export async function fetchLocalDynamoReport(
  endpoint: string,
  options: { reset?: boolean; signal?: AbortSignal } = {},
): Promise<LocalDynamoReport> {
  const res = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-amz-json-1.0", "x-amz-target": LOCAL_REPORT_TARGET },
    body: JSON.stringify({ reset: options.reset === true }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const text = await res.text();
  if (!res.ok) throw new LocalReportError(`${endpoint} answered ${res.status} to LocalReport: ${text.slice(0, 200)}`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new LocalReportError(`${endpoint} answered LocalReport with no JSON: ${text.slice(0, 200)}`);
  }
  const parsed = reportSchema.safeParse(body);
  if (!parsed.success)
    throw new LocalReportError(`${endpoint} answered LocalReport with no report: ${parsed.error.message}`);
  return parsed.data;
}

/** How close a partition came to its limits: the larger of its peak write and read shares. */
export function peakShare(partition: PartitionReport, limits: LocalDynamoReport["limits"]): number {
  return Math.max(
    partition.peakWriteUnitsPerSecond / limits.writeUnitsPerSecond,
    partition.peakReadUnitsPerSecond / limits.readUnitsPerSecond,
  );
}

/**
 * The `top` partitions by peak share of their limit, as a plain-text table (one header line, one
 * line per partition, one totals line), `peak/limit` per kind of unit.
 */
export function formatPartitionReport(report: LocalDynamoReport, options: { top?: number } = {}): string {
  const top = options.top ?? 10;
  const { limits } = report;
  const rows = [...report.partitions]
    .sort((a, b) => peakShare(b, limits) - peakShare(a, limits) || b.writeUnits - a.writeUnits)
    .slice(0, top);
  const table: string[][] = [
    ["partition", "write units", "peak write/s / limit", "read units", "peak read/s / limit", "throttled", "conflicts"],
    ...rows.map((p) => [
      `${p.table}${p.index ? `/${p.index}` : ""} ${p.partitionKey}`,
      num(p.writeUnits),
      `${num(p.peakWriteUnitsPerSecond)}/${num(limits.writeUnitsPerSecond)} (${pct(p.peakWriteUnitsPerSecond / limits.writeUnitsPerSecond)})`,
      num(p.readUnits),
      `${num(p.peakReadUnitsPerSecond)}/${num(limits.readUnitsPerSecond)} (${pct(p.peakReadUnitsPerSecond / limits.readUnitsPerSecond)})`,
      String(p.throttledRequests),
      String(p.conflicts),
    ]),
  ];
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
  const lines = table.map((row) =>
    row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  "),
  );
  const t = report.totals;
  lines.push(
    `${report.mode} mode, ${t.partitions} partitions (top ${rows.length} by peak/limit): ${num(t.writeUnits)} write units, ` +
      `${num(t.readUnits)} read units, ${t.throttledRequests} throttled, ${t.conflicts} conflicts`,
  );
  return lines.join("\n");
}

function num(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function pct(share: number): string {
  return `${Math.round(share * 100)}%`;
}
