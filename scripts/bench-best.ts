/**
 * `npm run bench:best`: best-available holds beside plain holds, on one gateway, one run.
 *
 * Two events of the same shape (BENCH_BEST_SECTIONS sections of 20 rows x 25 seats, one tier);
 * BENCH_BEST_FANS admitted fans on each, BENCH_CONCURRENCY (64) requests in flight, every fan one
 * request for a pair:
 *   - plain: `{"seats": [two adjacent seats]}`, fan i the i-th pair, so no two fans ever meet
 *     (the cheapest a hold of two seats gets: one shield lease, one ledger read, one transaction);
 *   - best: `{"best": {"quantity": 2, "tier": "T"}}`, every fan the same request at once, so they
 *     all want the front rows' centre (the real rush): the map proposes, the shield and DynamoDB
 *     settle who gets which pair.
 * Prints holds/s of each, their ratio, the answers that were not 201 by status and code, the
 * DynamoDB hold transactions per best hold (gateway_dynamodb_requests_total{operation="hold"}) and
 * pairs left with a single stranded seat (audit-style: a free seat between two taken ones or a
 * taken one and a row's end).
 * REDIS_URL / DYNAMODB_ENDPOINT: use them instead of spawning.
 */
import { z } from "zod";
import { spawnLocalDynamoDB } from "../src/local/dynamodb.js";
import { spawnRedis } from "../src/local/redis.js";
import { admitAll, putBenchEvent, startServer } from "./bench-gateway.js";
import { timed } from "./lib/in-flight.js";

const env = z
  .object({
    REDIS_URL: z.string().optional(),
    DYNAMODB_ENDPOINT: z.string().optional(),
    BENCH_BEST_FANS: z.coerce.number().int().positive().default(2_000),
    BENCH_BEST_SECTIONS: z.coerce.number().int().positive().default(10),
    BENCH_CONCURRENCY: z.coerce.number().int().positive().default(64),
  })
  .parse(process.env);

const ROWS = 20;
const PER_ROW = 25;
const step = (s: string) => process.stderr.write(`bench:best: ${s}\n`);

const redis = env.REDIS_URL ? undefined : await spawnRedis();
const dynamo = env.DYNAMODB_ENDPOINT ? undefined : await spawnLocalDynamoDB({ port: 0 });
const gw = await startServer("gateway", {
  REDIS_URL: env.REDIS_URL ?? redis!.url,
  DYNAMODB_ENDPOINT: env.DYNAMODB_ENDPOINT ?? dynamo!.endpoint,
  DYNAMODB_TABLE: `bench_best_${Date.now()}`,
});

interface Run {
  perSecond: number;
  granted: number;
  seconds: number;
  refusals: Map<string, number>;
  holdTransactions: number;
  shieldLosses: number;
  dynamoLosses: number;
  seats: string[];
}

const sections = Array.from({ length: env.BENCH_BEST_SECTIONS }, (_, s) => ({
  id: `S${s}`,
  tier: "T",
  price: 5000,
  rows: ROWS,
  seatsPerRow: PER_ROW,
}));
/** Pair i: two adjacent seats, pairs never overlapping (12 per row of 25). */
const pairOf = (i: number): string[] => {
  const perSection = ROWS * Math.floor(PER_ROW / 2);
  const s = Math.floor(i / perSection) % sections.length;
  const k = i % perSection;
  const row = Math.floor(k / Math.floor(PER_ROW / 2)) + 1;
  const first = (k % Math.floor(PER_ROW / 2)) * 2 + 1;
  return [`S${s}-${row}-${first}`, `S${s}-${row}-${first + 1}`];
};

/** The gateway's counters this bench reads: hold transactions, and races lost at the shield and in DynamoDB. */
const counters = async () => {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const sum = (re: RegExp) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
  return {
    holds: sum(/^gateway_dynamodb_requests_total\{operation="hold"[^}]*\} (\d+)/gm),
    shield: sum(/^gateway_conflicts_total\{stage="shield"[^}]*\} (\d+)/gm),
    dynamodb: sum(/^gateway_conflicts_total\{stage="dynamodb"[^}]*\} (\d+)/gm),
  };
};

async function run(kind: "plain" | "best"): Promise<Run> {
  const eventId = `${kind}${Date.now()}`;
  step(`${kind}: ${sections.length * ROWS * PER_ROW} seats, admitting ${env.BENCH_BEST_FANS} fans`);
  await putBenchEvent(gw.url, eventId, { name: kind, sections, admitPerSecond: 100_000 });
  const fans = Array.from({ length: env.BENCH_BEST_FANS }, (_, i) => `${kind}-fan${i}`);
  const { accessTokens } = await admitAll(gw.url, eventId, fans, 256);
  const refusals = new Map<string, number>();
  const seats: string[] = [];
  let granted = 0;
  const before = await counters();
  step(`${kind}: ${accessTokens.length} holds of two, ${env.BENCH_CONCURRENCY} in flight`);
  const ms = await timed(accessTokens.length, env.BENCH_CONCURRENCY, async (i) => {
    const body = kind === "plain" ? { seats: pairOf(i) } : { best: { quantity: 2, tier: "T" } };
    const res = await fetch(`${gw.url}/v1/events/${eventId}/holds`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${accessTokens[i]}` },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as { seats?: string[]; error?: { code?: string } };
    if (res.status === 201 && json.seats) {
      granted++;
      seats.push(...json.seats);
      return;
    }
    const key = `${res.status} ${json.error?.code ?? ""}`;
    refusals.set(key, (refusals.get(key) ?? 0) + 1);
  });
  return {
    perSecond: (granted / ms) * 1000,
    granted,
    seconds: ms / 1000,
    refusals,
    ...(await counters().then((after) => ({
      holdTransactions: after.holds - before.holds,
      shieldLosses: after.shield - before.shield,
      dynamoLosses: after.dynamodb - before.dynamodb,
    }))),
    seats,
  };
}

/** Free seats with a taken seat (or the row's end) on both sides, among rows that have any taken. */
function stranded(taken: string[]): number {
  const byRow = new Map<string, Set<number>>();
  for (const id of taken) {
    const [s, r, n] = id.split("-");
    const key = `${s}-${r}`;
    const row = byRow.get(key) ?? new Set<number>();
    row.add(Number(n));
    byRow.set(key, row);
  }
  let count = 0;
  for (const row of byRow.values()) {
    for (let n = 1; n <= PER_ROW; n++) {
      if (row.has(n)) continue;
      const leftTaken = n === 1 || row.has(n - 1);
      const rightTaken = n === PER_ROW || row.has(n + 1);
      if (leftTaken && rightTaken) count++;
    }
  }
  return count;
}

try {
  const plain = await run("plain");
  const best = await run("best");
  const line = (name: string, r: Run) =>
    `${name.padEnd(7)} ${r.perSecond.toFixed(0).padStart(6)} holds/s  ${r.granted} granted in ${r.seconds.toFixed(1)} s, ` +
    `${(r.holdTransactions / Math.max(1, r.granted)).toFixed(2)} hold transactions per hold, ` +
    `races lost: ${r.shieldLosses} at the shield, ${r.dynamoLosses} in DynamoDB, ` +
    `${stranded(r.seats)} single seats stranded, refused: ${
      r.refusals.size ? [...r.refusals].map(([k, n]) => `${k} x${n}`).join(", ") : "none"
    }`;
  process.stdout.write(
    `\n${line("plain", plain)}\n${line("best", best)}\nbest / plain: ${(best.perSecond / plain.perSecond).toFixed(2)}\n`,
  );
  process.stdout.write(
    `${JSON.stringify({
      plainHoldsPerSecond: Math.round(plain.perSecond),
      bestHoldsPerSecond: Math.round(best.perSecond),
      ratio: Number((best.perSecond / plain.perSecond).toFixed(3)),
      bestTransactionsPerHold: Number((best.holdTransactions / Math.max(1, best.granted)).toFixed(3)),
      bestStranded: stranded(best.seats),
    })}\n`,
  );
} finally {
  gw.child.kill("SIGTERM");
  await redis?.close();
  await dynamo?.close();
}
