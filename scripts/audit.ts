/**
 * `npm run audit -- --event <id> [--json] [--allow-pending]`: audits one event against the
 * authoritative store and the payment provider's charges (src/audit/audit.ts, docs/audit.md).
 *
 * Reads the gateway's environment (src/config.ts): DYNAMODB_ENDPOINT, else the local DynamoDB
 * on DYNAMODB_PORT if one answers (it never starts one); DYNAMODB_TABLE; AWS_REGION; and for the
 * simulated provider's charges the Redis the gateway keeps them in: PAYMENT_REDIS_URL, else
 * REDIS_URL, else 127.0.0.1:6379 if it answers.
 *
 * Exit codes: 0 every check passed; 1 a check failed, or the store stopped answering mid-audit;
 * 2 the audit could not start (bad usage or configuration, no DynamoDB, unknown table or event).
 */
import { parseArgs } from "node:util";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Redis } from "ioredis";
import { type AuditCheck, type AuditProgress, type AuditReport, auditEvent } from "../src/audit/audit.js";
import { dynamoAnswers } from "../src/bootstrap.js";
import { ConfigError, type GatewayConfig, loadGatewayConfig } from "../src/config.js";
import { createDynamoClient } from "../src/dynamodb/client.js";
import { tableExists } from "../src/dynamodb/table.js";
import { createInventory } from "../src/inventory/index.js";
import { redisAnswers } from "../src/local/redis.js";
import { createSimulatedProvider } from "../src/payments/simulated.js";

const USAGE = `usage: npm run audit -- --event <eventId> [options]

  --event <id>               the event to audit (required)
  --json                     print the report as JSON instead of a table
  --allow-pending            a pending purchase passes (the sale is still running)
  --payment-namespace <ns>   the simulated provider's namespace (default: sim)
  --no-payments              do not read charges (the charge checks are skipped)
  --quiet                    no progress on stderr
  --help                     this text

environment: DYNAMODB_ENDPOINT (unset: the local DynamoDB on DYNAMODB_PORT, if one answers),
DYNAMODB_TABLE, AWS_REGION, PAYMENT_REDIS_URL (the provider's ledger, as the gateway uses it;
unset: REDIS_URL; unset: 127.0.0.1:6379, if it answers).
exit: 0 all checks pass, 1 a check failed, 2 the audit could not start.`;

const EVENT_ID = /^[A-Za-z0-9_]{1,32}$/;
const DEFAULT_REDIS = "redis://127.0.0.1:6379";

class UsageError extends Error {
  override name = "UsageError";
}

interface Args {
  eventId: string;
  json: boolean;
  allowPending: boolean;
  paymentNamespace: string;
  payments: boolean;
  quiet: boolean;
}

const OPTIONS = {
  event: { type: "string" },
  json: { type: "boolean", default: false },
  "allow-pending": { type: "boolean", default: false },
  "payment-namespace": { type: "string", default: "sim" },
  "no-payments": { type: "boolean", default: false },
  quiet: { type: "boolean", default: false },
  help: { type: "boolean", default: false },
} as const;

function parse(argv: string[]): Args | "help" {
  const parsed = (() => {
    try {
      return parseArgs({ args: argv, options: OPTIONS, allowPositionals: false, strict: true });
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  })();
  const v = parsed.values;
  if (v.help) return "help";
  if (v.event === undefined) throw new UsageError("--event <eventId> is required");
  if (!EVENT_ID.test(v.event)) throw new UsageError(`--event ${v.event}: an event id matches ${EVENT_ID.source}`);
  return {
    eventId: v.event,
    json: v.json,
    allowPending: v["allow-pending"],
    paymentNamespace: v["payment-namespace"],
    payments: !v["no-payments"],
    quiet: v.quiet,
  };
}

/** The gateway's resolution (src/bootstrap.ts), minus starting anything: an audit only reads. */
async function resolveDynamoEndpoint(config: GatewayConfig): Promise<string> {
  if (config.dynamodb.endpoint) return config.dynamodb.endpoint;
  const local = `http://127.0.0.1:${config.dynamodb.localPort}`;
  if (config.dynamodb.localPort !== 0 && (await dynamoAnswers(local))) return local;
  throw new UsageError(
    `no DynamoDB: DYNAMODB_ENDPOINT is unset and nothing answers on ${local}. ` +
      "Set DYNAMODB_ENDPOINT, or start the gateway or `npm run dynamodb` first (the audit never starts a store).",
  );
}

/** Where the gateway keeps the simulated provider's ledger (main.ts): PAYMENT_REDIS_URL, else REDIS_URL. */
async function resolveLedgerRedis(config: GatewayConfig): Promise<string | undefined> {
  const [name, url] = config.paymentRedisUrl
    ? ["PAYMENT_REDIS_URL", config.paymentRedisUrl]
    : ["REDIS_URL", config.redisUrl];
  if (url) {
    if (await redisAnswers(url, 2_000)) return url;
    throw new UsageError(`${name} ${url} does not answer (pass --no-payments to audit without charges)`);
  }
  return (await redisAnswers(DEFAULT_REDIS)) ? DEFAULT_REDIS : undefined;
}

function progressPrinter(quiet: boolean): (p: AuditProgress) => void {
  if (quiet) return () => {};
  let lastPhase = "";
  let lastAt = 0;
  return (p) => {
    const now = Date.now();
    // Every phase change and its end, in between at most a line a second: a large event reads a while.
    if (p.phase === lastPhase && now - lastAt < 1_000 && p.done !== p.total) return;
    lastPhase = p.phase;
    lastAt = now;
    process.stderr.write(`audit: ${p.phase} ${p.done}${p.total !== undefined ? `/${p.total}` : ""}\n`);
  };
}

const RESULT = { pass: "PASS", fail: "FAIL", skip: "SKIP" } as const;
const money = (n: number) => n.toLocaleString("en-US");

function detailLines(check: AuditCheck): string[] {
  const lines = [check.summary];
  if (check.status === "fail") {
    for (const o of check.offenders) lines.push(`  ${o.id}: ${o.problem}`);
    const more = check.offenderCount - check.offenders.length;
    if (more > 0) lines.push(`  ... and ${more} more`);
  }
  return lines;
}

function render(report: AuditReport, table: string): string {
  const out: string[] = [`Audit of event ${report.eventId} (table ${table}, ${report.checkedAt})`, ""];
  const width = Math.max(5, ...report.checks.map((c) => c.title.length));
  out.push(`${"CHECK".padEnd(width)}  RESULT  DETAILS`);
  for (const check of report.checks) {
    const [first, ...rest] = detailLines(check);
    out.push(`${check.title.padEnd(width)}  ${RESULT[check.status].padEnd(6)}  ${first}`);
    for (const line of rest) out.push(`${" ".repeat(width + 10)}${line}`);
  }
  const t = report.totals;
  out.push("", "Totals");
  out.push(
    `  seats              total ${t.seats.total} (layout ${t.seats.expected})  available ${t.seats.available}  held ${t.seats.held}  sold ${t.seats.sold}`,
  );
  out.push(
    `  general admission  capacity ${t.generalAdmission.capacity}  available ${t.generalAdmission.available}  held ${t.generalAdmission.held}  sold ${t.generalAdmission.sold}`,
  );
  const p = t.purchases;
  out.push(
    `  purchases          ${p.total}: confirmed ${p.confirmed.count} (${money(p.confirmed.amount)})  pending ${p.pending.count}  failed ${p.failed.count}  refunded ${p.refunded.count} (${money(p.refunded.amount)})`,
  );
  out.push(
    t.charges
      ? `  charges            captured ${t.charges.captured.count} (${money(t.charges.captured.amount)})  refunded ${t.charges.refunded.count} (${money(t.charges.refunded.amount)})`
      : "  charges            not read",
  );
  const st = report.stranded;
  const where = Object.entries(st.bySection)
    .map(([section, n]) => `${section} ${n}`)
    .join(", ");
  out.push(
    `  stranded seats     ${st.count}${st.count > 0 ? ` (${where}; first: ${st.seats.slice(0, 10).join(" ")})` : ""}  (a figure, not a check: single seats left between taken ones)`,
  );
  const failed = report.checks.filter((c) => c.status === "fail").length;
  out.push(
    "",
    failed === 0
      ? `RESULT: PASS (${report.checks.length} checks${report.passes > 1 ? `, ${report.passes} reads` : ""})`
      : `RESULT: FAIL (${failed} of ${report.checks.length} checks failed, confirmed over ${report.passes} reads)`,
  );
  return `${out.join("\n")}\n`;
}

async function run(argv: string[]): Promise<number> {
  let args: Args | "help";
  let config: GatewayConfig;
  try {
    args = parse(argv);
    if (args === "help") {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    // No argv: the gateway's --role flag means nothing here.
    config = loadGatewayConfig(process.env, []);
  } catch (err) {
    if (err instanceof UsageError || err instanceof ConfigError) {
      process.stderr.write(`audit: ${err.message}\n\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }

  let dynamo: DynamoDBClient | undefined;
  let redis: Redis | undefined;
  try {
    const endpoint = await resolveDynamoEndpoint(config);
    dynamo = createDynamoClient({ endpoint, region: config.dynamodb.region });
    const table = config.dynamodb.table;
    let exists: boolean;
    try {
      exists = await tableExists(dynamo, table);
    } catch (err) {
      throw new UsageError(`DynamoDB at ${endpoint} does not answer: ${(err as Error).message}`);
    }
    if (!exists) throw new UsageError(`no table ${table} at ${endpoint} (set DYNAMODB_TABLE)`);

    const redisUrl = args.payments ? await resolveLedgerRedis(config) : undefined;
    if (args.payments && !redisUrl) {
      process.stderr.write("audit: no Redis (REDIS_URL unset, nothing on 127.0.0.1:6379): charges are not checked\n");
    }
    if (redisUrl) {
      redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
      redis.on("error", () => {});
    }
    const payments = redis ? createSimulatedProvider({ redis, namespace: args.paymentNamespace }) : undefined;
    const inventory = createInventory({ client: dynamo, tableName: table });

    const report = await auditEvent({ inventory, ...(payments ? { payments } : {}) }, args.eventId, {
      allowPending: args.allowPending,
      onProgress: progressPrinter(args.quiet),
    });
    if (!report.eventFound) throw new UsageError(`no event ${args.eventId} in table ${table}`);
    process.stdout.write(args.json ? `${JSON.stringify(report, null, 2)}\n` : render(report, table));
    return report.ok ? 0 : 1;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`audit: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(`audit: could not finish: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    redis?.disconnect();
    dynamo?.destroy();
  }
}

process.exitCode = await run(process.argv.slice(2));
