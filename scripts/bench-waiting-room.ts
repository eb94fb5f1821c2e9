/**
 * Waiting-room throughput, through the module (scripts + reply parsing + token signing), beside
 * the raw rate of a trivial EVALSHA on the same Redis in the same run, so the figures say how
 * much of Redis' script budget one join or one status poll costs.
 *
 *   npm run bench:waiting-room                      # spawns a redis-server of its own
 *   REDIS_URL=redis://127.0.0.1:6379 npm run bench:waiting-room
 *
 * Then the token signatures alone, in this process with no I/O: sign and verify of an access token
 * per CPU second for HS256 (the gateway secret), ES256 and EdDSA (a key set, TOKEN_ALG), each for
 * BENCH_TOKEN_SECONDS, and their ratio to HS256: what TOKEN_ALG costs every status poll and claim
 * (a token not seen before, and one the service has verified already).
 *
 * Knobs (environment): BENCH_JOINS, BENCH_POLLS, BENCH_TRIVIAL, BENCH_CONCURRENCY (calls in
 * flight), BENCH_CONNECTIONS, BENCH_TOKEN_SECONDS. Prints a table, then one JSON line.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { z } from "zod";
import { spawnRedis, type SpawnedRedis } from "../src/local/redis.js";
import {
  createTokenService,
  createWaitingRoom,
  generateSigningKey,
  type TokenAlgorithm,
  type TokenService,
  waitingRoomKeys,
  type WaitingRoom,
} from "../src/waiting-room/index.js";
import { VERIFIED_KEPT } from "../src/waiting-room/tokens.js";
import { measure } from "./lib/measure-scripts.js";

const env = z
  .object({
    REDIS_URL: z.string().url().optional(),
    BENCH_JOINS: z.coerce.number().int().positive().default(20_000),
    BENCH_POLLS: z.coerce.number().int().positive().default(40_000),
    BENCH_TRIVIAL: z.coerce.number().int().positive().default(40_000),
    BENCH_CONCURRENCY: z.coerce.number().int().positive().default(64),
    BENCH_CONNECTIONS: z.coerce.number().int().positive().default(4),
    BENCH_TOKEN_SECONDS: z.coerce.number().positive().default(1),
  })
  .parse(process.env);

function expectOk(result: { ok: boolean }, what: string): void {
  if (!result.ok) throw new Error(`${what} failed: ${JSON.stringify(result)}`);
}

interface TokenRate {
  alg: TokenAlgorithm;
  signPerSecond: number;
  /** A token not seen before (with a key set, one the service has not remembered). */
  verifyPerSecond: number;
  /** The same token again (a fan's next poll or claim): a key set's service remembers it. */
  verifySeenPerSecond: number;
}

/**
 * Calls `op` for `seconds` of wall time (checking the clock every 100 calls); calls per second of
 * this process's CPU (user + system), which a machine shared with other work does not skew the way
 * it skews wall time.
 */
function rate(seconds: number, op: (i: number) => void): number {
  for (let i = 0; i < 500; i++) op(i); // warm-up
  const cpu = process.cpuUsage();
  const end = performance.now() + seconds * 1000;
  let n = 0;
  while (performance.now() < end) for (let k = 0; k < 100; k++) op(n++);
  const used = process.cpuUsage(cpu);
  return n / ((used.user + used.system) / 1e6);
}

/** Sign and verify rates of an access token as a poll of an admitted fan carries it, per algorithm. */
function tokenRates(seconds: number): TokenRate[] {
  const now = Date.now();
  const claims = {
    fanId: "fan-0123456789",
    eventId: "bench_0123456789ab",
    sessionId: "1764640000000-0123456789abcdef",
    epoch: "0123456789abcdef",
    issuedAt: new Date(now),
    expiresAt: new Date(now + 900_000),
  };
  const services: [TokenAlgorithm, TokenService][] = [
    ["HS256", createTokenService({ secret: randomBytes(32).toString("hex") })],
    ["ES256", createTokenService({ keys: [generateSigningKey("ES256")] })],
    ["EdDSA", createTokenService({ keys: [generateSigningKey("EdDSA")] })],
  ];
  return services.map(([alg, tokens]) => {
    // More distinct tokens than a key set's service remembers (VERIFIED_KEPT), cycled in order:
    // each one has been forgotten when it comes round again.
    const fresh = Array.from({ length: VERIFIED_KEPT + 5_000 }, (_, i) =>
      tokens.signAccessToken({ ...claims, fanId: `fan-${i}` }),
    );
    const signPerSecond = rate(seconds, (i) => {
      tokens.signAccessToken({ ...claims, fanId: `fan-${i}` });
    });
    const verifyPerSecond = rate(seconds, (i) => {
      if (!tokens.verifyAccessToken(fresh[i % fresh.length] as string, claims.eventId).ok) {
        throw new Error(`${alg} token refused`);
      }
    });
    const seen = fresh[0] as string;
    const verifySeenPerSecond = rate(seconds, () => {
      if (!tokens.verifyAccessToken(seen, claims.eventId).ok) throw new Error(`${alg} token refused`);
    });
    return { alg, signPerSecond, verifyPerSecond, verifySeenPerSecond };
  });
}

async function main(): Promise<void> {
  const spawned: SpawnedRedis | undefined = env.REDIS_URL ? undefined : await spawnRedis();
  const url = env.REDIS_URL ?? spawned?.url ?? "";
  const clients = Array.from({ length: env.BENCH_CONNECTIONS }, () => new Redis(url));
  const rooms: WaitingRoom[] = clients.map((redis) =>
    createWaitingRoom({ redis, secret: randomBytes(32).toString("hex") }),
  );
  const room = (i: number) => rooms[i % rooms.length] as WaitingRoom;
  const client = (i: number) => clients[i % clients.length] as Redis;
  const eventId = `bench_${randomBytes(6).toString("hex")}`;
  const fanIds = Array.from({ length: env.BENCH_JOINS }, (_, i) => `fan-${i}`);

  try {
    // A live on-sale: admitting 500/s into at most 100,000 sessions while fans join and poll.
    expectOk(
      await room(0).configure(eventId, {
        onSaleAt: Date.now() - 1_000,
        admitPerSecond: 500,
        maxActive: 100_000,
        sessionSeconds: 900,
      }),
      "configure",
    );

    // the trivial script, on a key of the same event (so the same slot, were it a cluster)
    const trivialSha = String(await client(0).script("LOAD", "return 1"));
    const trivialKey = waitingRoomKeys(eventId).room;
    const trivial = await measure(client(0), "trivial EVALSHA", env.BENCH_TRIVIAL, env.BENCH_CONCURRENCY, (i) =>
      client(i).evalsha(trivialSha, 1, trivialKey),
    );
    const joins = await measure(client(0), "join (module)", env.BENCH_JOINS, env.BENCH_CONCURRENCY, async (i) =>
      expectOk(await room(i).join(eventId, fanIds[i] as string), "join"),
    );
    const polls = await measure(client(0), "status poll (module)", env.BENCH_POLLS, env.BENCH_CONCURRENCY, async (i) =>
      expectOk(await room(i).statusOf(eventId, fanIds[(i * 7_919) % fanIds.length] as string), "status"),
    );
    const stats = await room(0).stats(eventId);
    const admitted = stats.ok ? stats.stats.admitted : 0;

    const tokens = tokenRates(env.BENCH_TOKEN_SECONDS);
    const hs256 = tokens[0] as TokenRate;

    const rows = [trivial, joins, polls];
    const pad = (s: string, n: number) => s.padEnd(n);
    const num = (x: number, d = 0) => x.toFixed(d).padStart(10);
    const lines = [
      `waiting-room benchmark: ${env.BENCH_CONNECTIONS} connections, ${env.BENCH_CONCURRENCY} calls in flight, redis ${spawned ? "spawned" : url}`,
      `${pad("operation", 22)}${"ops".padStart(10)}${"ops/s".padStart(10)}${"p50 ms".padStart(10)}${"p99 ms".padStart(10)}${"vs trivial".padStart(12)}${"redis us/call".padStart(15)}${"redis CPU us/op".padStart(17)}`,
      ...rows.map(
        (r) =>
          `${pad(r.name, 22)}${num(r.ops)}${num(r.perSecond)}${num(r.p50Ms, 2)}${num(r.p99Ms, 2)}${(r.perSecond / trivial.perSecond).toFixed(2).padStart(12)}${r.redisUsPerCall.toFixed(1).padStart(15)}${r.redisCpuUsPerOp.toFixed(1).padStart(17)}`,
      ),
      `(${admitted} fans admitted during the run; joins are batched per event in each process, so one call carries many: us/op is the redis-server's CPU over the run per operation, INFO cpu)`,
      "",
      `token signatures (one process, no I/O, ${env.BENCH_TOKEN_SECONDS} s each; an access token; per CPU second)`,
      `${pad("alg", 8)}${"sign/s".padStart(10)}${"us/sign".padStart(10)}${"verify/s".padStart(11)}${"us/verify".padStart(11)}${"verify x HS256".padStart(16)}${"seen again/s".padStart(14)}${"us".padStart(8)}`,
      ...tokens.map(
        (t) =>
          `${pad(t.alg, 8)}${num(t.signPerSecond)}${num(1e6 / t.signPerSecond, 1)}${num(t.verifyPerSecond).padStart(11)}${num(1e6 / t.verifyPerSecond, 1).padStart(11)}${(t.verifyPerSecond / hs256.verifyPerSecond).toFixed(3).padStart(16)}${num(t.verifySeenPerSecond).padStart(14)}${num(1e6 / t.verifySeenPerSecond, 1).padStart(8)}`,
      ),
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
    process.stdout.write(
      `${JSON.stringify({
        bench: "waiting-room",
        connections: env.BENCH_CONNECTIONS,
        concurrency: env.BENCH_CONCURRENCY,
        trivialEvalshaPerSecond: Math.round(trivial.perSecond),
        joinsPerSecond: Math.round(joins.perSecond),
        statusPollsPerSecond: Math.round(polls.perSecond),
        joinRatio: Number((joins.perSecond / trivial.perSecond).toFixed(3)),
        statusRatio: Number((polls.perSecond / trivial.perSecond).toFixed(3)),
        joinP99Ms: Number(joins.p99Ms.toFixed(2)),
        trivialRedisUsPerCall: Number(trivial.redisUsPerCall.toFixed(1)),
        joinRedisUsPerCall: Number(joins.redisUsPerCall.toFixed(1)),
        statusRedisUsPerCall: Number(polls.redisUsPerCall.toFixed(1)),
        joinRedisCpuUsPerOp: Number(joins.redisCpuUsPerOp.toFixed(1)),
        statusRedisCpuUsPerOp: Number(polls.redisCpuUsPerOp.toFixed(1)),
        statusP99Ms: Number(polls.p99Ms.toFixed(2)),
        admitted,
        tokens: Object.fromEntries(
          tokens.map((t) => [
            t.alg,
            {
              signPerSecond: Math.round(t.signPerSecond),
              verifyPerSecond: Math.round(t.verifyPerSecond),
              verifySeenPerSecond: Math.round(t.verifySeenPerSecond),
              verifyVsHs256: Number((t.verifyPerSecond / hs256.verifyPerSecond).toFixed(4)),
              signVsHs256: Number((t.signPerSecond / hs256.signPerSecond).toFixed(4)),
            },
          ]),
        ),
      })}\n`,
    );
  } finally {
    await room(0).remove(eventId);
    for (const c of clients) c.disconnect();
    await spawned?.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench-waiting-room failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
