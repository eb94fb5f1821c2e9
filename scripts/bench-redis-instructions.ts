/**
 * Redis cost of the waiting room's operations in instructions, not seconds: redis-server runs
 * under valgrind's callgrind, which counts every instruction it executes, so the same code and
 * inputs give the same figure whatever else the machine is doing. CPU time (`INFO cpu`, what
 * bench:gateway and bench:waiting-room report) is the figure that matters in production, but on a
 * shared, noisy machine it moves by a third between runs; a change to a Lua script is measured
 * here first, then confirmed in CPU time.
 *
 *   npm run bench:redis-instructions          # needs valgrind (apt-get install valgrind)
 *
 * The server is the real one (`REDIS_SERVER`, default redis-server on the PATH), about fifty times
 * slower under valgrind. Each phase is counted alone (callgrind_control zeroes the counters before
 * it and dumps them after), less the server's idle instructions over the phase's length (its cron,
 * measured first). The operations go through the waiting room's module, as a gateway sends them:
 *   - joins of new fans into a moving line, in batches of exactly each size of BENCH_BATCHES
 *     (join-batch-n.lua: every join of one turn of the event loop goes in one call), BENCH_FANS fans
 *     a size, the line growing across sizes as it does in an on-sale; then batches of 32 whose fans
 *     each come from an address of their own, so each join takes a new per-IP bucket as well;
 *   - a waiting fan's status poll that Redis answers (status-10.lua, the line cache off), without
 *     limits and then with a per-IP and a per-fan limit, as a gateway sends it;
 *   - heartbeats: those a gateway's view refresh carries for the polls it answered from its cache
 *     (line-view-8.lua, BENCH_BEATS fans a call, all still in line), and a fan shard's, as a room
 *     with fan shards sends them (beats-1.lua 'keep' for polls, 'join' for joins);
 *   - lookups: the first polls of fans a gateway does not know (they joined through another), which
 *     its next view refresh looks up (line-view-8.lua, BENCH_BEATS fans a call), instead of a
 *     status-10.lua each;
 *   - a view refresh with 2,000 vacated places ahead of the cursor: the list sent, and not sent
 *     again while nobody is given up (the gateway's version of it is the room's);
 *   - a join batch of 32 in a room with 12 fan shards and claims, beside the same batch's calls when
 *     the records live on the shards (issue 28 steps 2 and 3, not yet called by a gateway): the
 *     event's slot's range (line-range-8.lua) and a shard's records (fan-records-5.lua 'join', 32
 *     fans a call and 3);
 *   - for scale, a trivial script (`return 1`) on the event's slot.
 * Knobs: BENCH_CLAIMS (1: the rooms admit by claims, so they keep no `fifo`), BENCH_FANS (default 3,200), BENCH_BATCHES (default 1,8,32), BENCH_POLLS (default 1,000),
 * BENCH_BEATS (default 200), BENCH_FUNCTIONS (1, the default: the scripts as Redis Functions, as
 * a gateway on Redis 7 runs them; 0: EVALSHA, as REDIS_FUNCTIONS=false), REDIS_SERVER. Prints a
 * table, then one JSON line.
 *
 * Where the instructions go: BENCH_PROFILE_DIR=<dir> keeps each phase's callgrind dump there as
 * `<n>-<phase>.callgrind`; with a redis-server built with symbols (`make MALLOC=libc CFLAGS=-g` in
 * a Redis source tree, named by REDIS_SERVER), `callgrind_annotate --inclusive=yes <file>` lists
 * the server's and Lua's functions by cost.
 */
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { z } from "zod";
import { freePort, redisAnswers } from "../src/local/redis.js";
import { registerScripts, scriptFamily, useRedisFunctions } from "../src/redis/scripts.js";
import { createWaitingRoom, waitingRoomKeys } from "../src/waiting-room/index.js";
import { lineKeys } from "../src/waiting-room/keys.js";
import { waitingRoomScripts } from "../src/waiting-room/scripts.js";

const env = z
  .object({
    REDIS_SERVER: z.string().default("redis-server"),
    BENCH_FANS: z.coerce.number().int().positive().default(3_200),
    BENCH_BATCHES: z
      .string()
      .default("1,8,32")
      .transform((s) => s.split(",").map(Number))
      .pipe(z.array(z.number().int().min(1).max(256)).min(1)),
    BENCH_POLLS: z.coerce.number().int().positive().default(1_000),
    BENCH_BEATS: z.coerce.number().int().min(1).max(2_000).default(200),
    /** 1: the rooms of the join, poll and view phases admit by claims (WAITING_ROOM_CLAIMS); 0 (default): by name. */
    BENCH_CLAIMS: z.enum(["0", "1"]).default("0"),
    /** Fans admitted in each of the admission phases (by name, by claims). */
    BENCH_ADMITS: z.coerce.number().int().min(1).max(100_000).default(1_024),
    BENCH_PROFILE_DIR: z.string().optional(),
    /** 1 (default): the scripts as Redis Functions, as a gateway runs them; 0: EVALSHA (REDIS_FUNCTIONS=false). */
    BENCH_FUNCTIONS: z.enum(["0", "1"]).default("1"),
  })
  .parse(process.env);
useRedisFunctions(env.BENCH_FUNCTIONS === "1");

interface Row {
  operation: string;
  calls: number;
  fans: number;
  instructionsPerCall: number;
  instructionsPerFan: number;
}

function need(command: string, hint: string): void {
  const probe = spawnSync(command, ["--version"], { stdio: "ignore" });
  if (probe.error || probe.status !== 0) {
    process.stderr.write(`bench:redis-instructions needs ${command} (${hint})\n`);
    process.exit(2);
  }
}

/** callgrind's counters of one redis-server under valgrind: zeroed before a phase, read after. */
class Counter {
  private dumps = 0;
  constructor(
    private readonly pid: number,
    private readonly dir: string,
  ) {}

  zero(): void {
    this.control("-z");
  }

  /** The last dump's file (after read()). */
  lastDump = "";

  /** Instructions since the last zero (a dump file per call: `cg.out.<n>`). */
  async read(): Promise<number> {
    this.control("-d");
    this.dumps += 1;
    const name = (await readdir(this.dir)).find((f) => f.endsWith(`.${this.dumps}`) && f.startsWith("cg.out"));
    if (!name) throw new Error(`callgrind wrote no dump ${this.dumps} in ${this.dir}`);
    this.lastDump = join(this.dir, name);
    const text = await readFile(join(this.dir, name), "utf8");
    const total = /^(?:summary|totals):\s+(\d+)/m.exec(text);
    if (!total) throw new Error(`no totals in ${name}`);
    return Number(total[1]);
  }

  private control(flag: string): void {
    const run = spawnSync("callgrind_control", [flag, String(this.pid)], { encoding: "utf8" });
    if (run.status !== 0) throw new Error(`callgrind_control ${flag}: ${run.stderr || run.stdout}`);
  }
}

async function main(): Promise<void> {
  need("valgrind", "apt-get install valgrind");
  need(env.REDIS_SERVER, "REDIS_SERVER names the redis-server to measure");
  const dir = await mkdtemp(join(tmpdir(), "bench-redis-instr-"));
  const port = await freePort();
  const server = spawn(
    "valgrind",
    [
      "--tool=callgrind",
      `--callgrind-out-file=${join(dir, "cg.out")}`,
      env.REDIS_SERVER,
      "--port",
      String(port),
      "--save",
      "",
      "--appendonly",
      "no",
    ],
    { stdio: "ignore" },
  );
  const url = `redis://127.0.0.1:${port}`;
  const redis = new Redis(url, { commandTimeout: 600_000, lazyConnect: true });
  try {
    const deadline = Date.now() + 60_000;
    while (!(await redisAnswers(url, 2_000))) {
      if (server.exitCode !== null) throw new Error(`redis-server under valgrind exited (${server.exitCode})`);
      if (Date.now() > deadline) throw new Error("redis-server under valgrind did not answer within 60 s");
      await sleep(250);
    }
    await redis.connect();
    const counter = new Counter(server.pid as number, dir);

    // The server's own instructions while idle (its cron), per ms, taken off every phase.
    counter.zero();
    const idleStart = performance.now();
    await sleep(2_000);
    const idlePerMs = (await counter.read()) / (performance.now() - idleStart);
    let profiles = 0;
    const phase = async (operation: string, calls: number, fans: number, run: () => Promise<void>): Promise<Row> => {
      counter.zero();
      const started = performance.now();
      await run();
      const counted = (await counter.read()) - idlePerMs * (performance.now() - started);
      if (env.BENCH_PROFILE_DIR) {
        await mkdir(env.BENCH_PROFILE_DIR, { recursive: true });
        const slug = operation.replace(/[^a-z0-9]+/gi, "-").replace(/^-|-$/g, "");
        profiles += 1;
        await copyFile(counter.lastDump, join(env.BENCH_PROFILE_DIR, `${profiles}-${slug}.callgrind`));
      }
      return {
        operation,
        calls,
        fans,
        instructionsPerCall: Math.round(counted / calls),
        instructionsPerFan: Math.round(counted / fans),
      };
    };

    const claimsRooms = env.BENCH_CLAIMS === "1" ? { claims: true } : {};
    const room = createWaitingRoom({
      redis,
      secret: randomBytes(32).toString("hex"),
      lineCache: false,
      ...claimsRooms,
    });
    const eventId = `instr_${randomBytes(4).toString("hex")}`;
    // A line that is moving, where a join is placed by the batch: one fan in it, nobody admitted.
    const configured = await room.configure(eventId, {
      onSaleAt: Date.now() - 1_000,
      admitPerSecond: 0,
      maxActive: 100,
      sessionSeconds: 900,
    });
    if (!configured.ok) throw new Error(`configure: ${JSON.stringify(configured)}`);
    const first = await room.join(eventId, "first");
    if (!first.ok) throw new Error(`join: ${JSON.stringify(first)}`);
    const rows: Row[] = [];
    const trivialSha = String(await redis.script("LOAD", "return 1"));
    const slot = waitingRoomKeys(eventId).room;
    rows.push(
      await phase("trivial EVALSHA (return 1)", 1_000, 1_000, async () => {
        for (let i = 0; i < 1_000; i += 50) {
          await Promise.all(Array.from({ length: 50 }, () => redis.evalsha(trivialSha, 1, slot)));
        }
      }),
    );

    let fan = 0;
    const waiting: string[] = [];
    for (const size of env.BENCH_BATCHES) {
      const calls = Math.max(1, Math.round(env.BENCH_FANS / size));
      const before = room.joinBatchCounters();
      rows.push(
        await phase(`join, ${size} new fan${size === 1 ? "" : "s"} a batch`, calls, calls * size, async () => {
          for (let c = 0; c < calls; c++) {
            const ids = Array.from({ length: size }, () => `fan-${fan++}-${randomBytes(6).toString("hex")}`);
            const joined = await Promise.all(ids.map((id) => room.join(eventId, id)));
            for (const j of joined) if (!j.ok || !j.created) throw new Error(`join: ${JSON.stringify(j)}`);
            if (waiting.length < env.BENCH_POLLS) waiting.push(...ids);
          }
        }),
      );
      const after = room.joinBatchCounters();
      const batches = after.batches - before.batches;
      if (batches !== calls || after.joins - before.joins !== calls * size) {
        throw new Error(
          `expected ${calls} batches of ${size}: ${batches} batches of ${after.joins - before.joins} joins`,
        );
      }
    }

    // As a gateway sends joins from the crowd: every fan from an address of its own, so each takes
    // the per-IP join limit's bucket (a new one) in the same call (the rate and burst of the
    // gateway's default, src/http/client-ip.ts).
    {
      const size = 32;
      const calls = Math.max(1, Math.round(env.BENCH_FANS / size));
      let ip = 0;
      rows.push(
        await phase(`join, ${size} new fans a batch, each from its own IP`, calls, calls * size, async () => {
          for (let c = 0; c < calls; c++) {
            const joined = await Promise.all(
              Array.from({ length: size }, () => {
                const n = ip++;
                const subject = `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
                return room.join(eventId, `fan-${fan++}-${randomBytes(6).toString("hex")}`, {
                  limits: { ip: { subject, perSecond: 5, burst: 10 } },
                });
              }),
            );
            for (const j of joined) if (!j.ok || !j.created) throw new Error(`join: ${JSON.stringify(j)}`);
          }
        }),
      );
    }

    // The same joins into a room with fan shards, the event's slot's part alone: the call
    // join-batch.ts sends there (one argument a fan: a sharded room takes its buckets and writes its
    // beats on the shards first), so this row is what a join costs the event's master, the
    // figure that bounds one event's join ceiling on a cluster (bench:line-cluster).
    {
      const shardedRoom = createWaitingRoom({
        redis,
        secret: randomBytes(32).toString("hex"),
        lineCache: false,
        fanShards: 12,
        ...claimsRooms,
      });
      const shardedEvent = `instr_${randomBytes(4).toString("hex")}`;
      const made = await shardedRoom.configure(shardedEvent, {
        onSaleAt: Date.now() - 1_000,
        admitPerSecond: 0,
        maxActive: 100,
        sessionSeconds: 900,
      });
      if (!made.ok) throw new Error(`configure: ${JSON.stringify(made)}`);
      const seed = await shardedRoom.join(shardedEvent, "first");
      if (!seed.ok) throw new Error(`join: ${JSON.stringify(seed)}`);
      const shardedKeys = lineKeys(waitingRoomKeys(shardedEvent));
      const [epoch, shards] = await redis.hmget(waitingRoomKeys(shardedEvent).room, "epoch", "fanShards");
      const runLine = registerScripts(redis, waitingRoomScripts);
      // `view`: '1' as a gateway without a fresh view of the line sends it, '0' as one with (the
      // script then leaves the fan view out: the gateway answers the new places from its view).
      const joinBatch = async (ids: string[], view: "0" | "1" = "1") => {
        const reply = await runLine<unknown[]>("joinBatch", shardedKeys, [
          ids.length,
          0,
          1,
          0,
          ...ids,
          epoch ?? "",
          shards ?? "0",
          view,
        ]);
        if (reply.length !== ids.length + 1 || !reply.slice(1).every((r) => typeof r === "number" && r > 0)) {
          throw new Error(`joinBatch: every fan should be placed: ${JSON.stringify(reply.slice(1, 4))}`);
        }
        if ((view === "0") !== (reply[0] as unknown[]).includes("viewless")) {
          throw new Error(`joinBatch: view ${view}, reply ${JSON.stringify(reply[0]).slice(0, 80)}`);
        }
      };
      // A line past its first 512 fans first, as an on-sale's is: Redis keeps a hash of up to 512
      // fields (hash-max-listpack-entries) as a listpack, where finding a fan is a scan (~35k
      // instructions a fan at 256).
      for (let c = 0; c < 20; c++) {
        await joinBatch(Array.from({ length: 32 }, () => `warm-${fan++}-${randomBytes(6).toString("hex")}`));
      }
      // Each size with and then without the view, one after the other: the line grows through the
      // rows, and a longer line's writes cost a little more.
      for (const size of env.BENCH_BATCHES) {
        for (const view of ["1", "0"] as const) {
          const calls = Math.max(1, Math.round(env.BENCH_FANS / size));
          const how = view === "1" ? "" : ", no fan view (the gateway's cache answers)";
          rows.push(
            await phase(
              `join, ${size} new fan${size === 1 ? "" : "s"} a batch, 12 fan shards: the event's slot's call${how}`,
              calls,
              calls * size,
              async () => {
                for (let c = 0; c < calls; c++) {
                  const ids = Array.from({ length: size }, () => `fan-${fan++}-${randomBytes(6).toString("hex")}`);
                  await joinBatch(ids, view);
                }
              },
            ),
          );
        }
      }
    }

    const polled = waiting.slice(0, env.BENCH_POLLS);
    rows.push(
      await phase("status poll of a waiting fan (status-10.lua)", polled.length, polled.length, async () => {
        for (const fanId of polled) {
          const s = await room.statusOf(eventId, fanId);
          if (!s.ok || s.place.status !== "waiting") throw new Error(`status: ${JSON.stringify(s)}`);
        }
      }),
    );

    // The same polls as a gateway sends them: each takes its address's bucket and its fan's bucket
    // (status-10.lua takes both in the same call), one address per fan.
    rows.push(
      await phase(
        "status poll of a waiting fan, with its per-IP and per-fan limits",
        polled.length,
        polled.length,
        async () => {
          for (const [i, fanId] of polled.entries()) {
            const limits = {
              ip: { subject: `10.9.${(i >> 8) & 255}.${i & 255}`, perSecond: 20, burst: 40 },
              fan: { subject: fanId, perSecond: 2, burst: 10 },
            };
            const s = await room.statusOf(eventId, fanId, { limits });
            if (!s.ok || s.place.status !== "waiting") throw new Error(`status: ${JSON.stringify(s)}`);
          }
        },
      ),
    );

    // Heartbeats, as line-view-8.lua takes them: the polls one gateway answered from its cache
    // since its last refresh (every 100 ms), each fan still in line. The same fans each call (a
    // later time each: a beat moves forward).
    const beats = polled.slice(0, Math.min(env.BENCH_BEATS, polled.length));
    const beatCalls = Math.max(1, Math.round(4_000 / beats.length));
    const run = registerScripts(redis, waitingRoomScripts);
    const keys = lineKeys(waitingRoomKeys(eventId));
    rows.push(
      await phase(
        `heartbeats in a view refresh, ${beats.length} fans a call (line-view-8.lua)`,
        beatCalls,
        beatCalls * beats.length,
        async () => {
          for (let c = 0; c < beatCalls; c++) {
            const reply = await run<unknown[]>("lineView", keys, ["16", "0", "0", "", "", ...beats]);
            const missing = reply.indexOf("missing");
            if (missing < 0 || reply.length !== missing + 4 || (reply[missing + 1] as unknown[]).length !== 0) {
              throw new Error(`lineView: every fan should still be in line: ${JSON.stringify(reply.slice(missing))}`);
            }
          }
        },
      ),
    );
    // Lookups, as line-view-8.lua takes them: the first polls that reached a gateway which did not
    // know the fans (each found: waiting, polled lately), against a status-10.lua call each.
    rows.push(
      await phase(
        `lookups in a view refresh, ${beats.length} fans a call (line-view-8.lua)`,
        beatCalls,
        beatCalls * beats.length,
        async () => {
          for (let c = 0; c < beatCalls; c++) {
            const reply = await run<unknown[]>("lineView", keys, ["16", beats.length, 60_000, "", "", ...beats]);
            const found = reply[reply.length - 1] as unknown[];
            if (
              reply[reply.length - 2] !== "found" ||
              found.length !== beats.length ||
              !found.every((p) => Number(p) > 0)
            ) {
              throw new Error(`lineView: every fan should be found: ${JSON.stringify(found.slice(0, 6))}`);
            }
          }
        },
      ),
    );
    // A gateway's refresh with no beats and 2,000 vacated places ahead of the cursor (the list's
    // cap, as after a crowd left): the list sent, then not sent again (the gateway's version is the
    // room's: nobody given up since). The places are written past the line's tail, where no fan's
    // count meets them, and removed after.
    const gone = waitingRoomKeys(eventId).gone;
    const tailNow = Number(await redis.hget(waitingRoomKeys(eventId).room, "tail"));
    const vacated = Array.from({ length: 2_000 }, (_, i) => tailNow + 1_000 + i);
    await redis.zadd(gone, ...vacated.flatMap((p) => [p, p]));
    const goneCalls = 20;
    let goneVersion = "";
    for (const [label, send] of [
      ["sent", () => ""],
      ["kept", () => goneVersion],
    ] as const) {
      rows.push(
        await phase(
          `a view refresh, 2,000 vacated places ahead, the list ${label} (line-view-8.lua)`,
          goneCalls,
          goneCalls,
          async () => {
            for (let c = 0; c < goneCalls; c++) {
              const reply = await run<unknown[]>("lineView", keys, ["2000", "0", "0", send(), ""]);
              const listed = (reply[reply.length - 5] as unknown[]).length;
              if (listed !== (label === "sent" ? 2_000 : 0))
                throw new Error(`lineView: ${listed} vacated places listed`);
              goneVersion = String(reply[reply.indexOf("goneVersion") + 1]);
            }
          },
        ),
      );
    }
    await redis.zrem(gone, ...vacated.map(String));
    // A fan shard's beats (a room with fan shards): 'join' for a batch of 32 joins, 'keep' for the
    // polls of one refresh. One key of its own, as a shard is.
    const shard = `wr:{bench-shard-${randomBytes(3).toString("hex")}}:beats`;
    const runBeats = registerScripts(
      redis,
      scriptFamily({ name: "bench-beats", files: { beats: "waiting-room/beats-1" } }),
    );
    const shardFans = Array.from({ length: 3_200 }, (_, i) => `shard-fan-${i}-${randomBytes(4).toString("hex")}`);
    rows.push(
      await phase("a fan shard's beats for joins, 32 fans a call (beats-1.lua 'join')", 100, 3_200, async () => {
        for (let c = 0; c < 100; c++) {
          await runBeats("beats", [shard], ["join", ...shardFans.slice(c * 32, c * 32 + 32)]);
        }
      }),
    );
    const kept = shardFans.slice(0, beats.length);
    rows.push(
      await phase(
        `a fan shard's beats for polls, ${kept.length} fans a call (beats-1.lua 'keep')`,
        beatCalls,
        beatCalls * kept.length,
        async () => {
          for (let c = 0; c < beatCalls; c++) {
            const reply = await runBeats<unknown[]>("beats", [shard], ["keep", ...kept]);
            if (reply.length !== 1) throw new Error(`beats keep: none should be missing: ${reply.length - 1} were`);
          }
        },
      ),
    );

    // A join in a room with 12 fan shards and claims, today (the event's slot's join-batch-n.lua
    // call of a batch of 32, the gateway's view answering: `viewless`), beside the same batch under
    // issue 28 steps 2 and 3 (docs/redis-cluster.md "Steps 2 and 3, call by call"): the event's
    // slot's range (line-range-8.lua, no fan id) and a shard's records (fan-records-5.lua 'join'),
    // a call of 32 fans and one of 3 (32 over 12 shards). The shard beats' calls of today's join
    // are the 'join' row above.
    {
      const sharded = createWaitingRoom({
        redis,
        secret: randomBytes(32).toString("hex"),
        claims: true,
        fanShards: 12,
      });
      const evt = `instr_shr_${randomBytes(3).toString("hex")}`;
      const made = await sharded.configure(evt, {
        onSaleAt: Date.now() - 1_000,
        admitPerSecond: 0,
        maxActive: 100,
        sessionSeconds: 900,
      });
      if (!made.ok) throw new Error(`configure: ${JSON.stringify(made)}`);
      const firstIn = await sharded.join(evt, "first");
      if (!firstIn.ok) throw new Error(`join: ${JSON.stringify(firstIn)}`);
      // a first view for the batches to be answered from, as a gateway serving the line has
      await sharded.statusOf(evt, "first");
      rows.push(
        await phase(
          "12 fan shards, today: a join batch of 32 (join-batch-n.lua and beats-1.lua 'join')",
          100,
          3_200,
          async () => {
            for (let c = 0; c < 100; c++) {
              const ids = Array.from({ length: 32 }, () => `shr-${fan++}-${randomBytes(6).toString("hex")}`);
              const joined = await Promise.all(ids.map((id) => sharded.join(evt, id)));
              for (const j of joined) if (!j.ok || !j.created) throw new Error(`join: ${JSON.stringify(j)}`);
            }
          },
        ),
      );
      await sharded.close();
      const k = waitingRoomKeys(evt);
      await redis.hset(k.room, "claims", "2");
      const [epoch, shards] = await redis.hmget(k.room, "epoch", "fanShards");
      const runNew = registerScripts(
        redis,
        scriptFamily({
          name: "bench-shard-records",
          files: { range: "waiting-room/line-range-8", records: "waiting-room/fan-records-5" },
        }),
      );
      rows.push(
        await phase(
          "records on the shards: the event's slot's range for 32 (line-range-8.lua)",
          100,
          3_200,
          async () => {
            for (let c = 0; c < 100; c++) {
              const reply = await runNew<unknown[]>("range", lineKeys(k), [32, epoch ?? "", shards ?? "0", 0]);
              if (reply[0] !== "range") throw new Error(`range: ${JSON.stringify(reply)}`);
            }
          },
        ),
      );
      const tag = `{bench-records-${randomBytes(3).toString("hex")}}`;
      const recordKeys = ["beats", "fans", "pre", "given", "frozen"].map((name) => `wr:${tag}:${name}`);
      let place = 0;
      for (const size of [32, 3]) {
        rows.push(
          await phase(
            `records on the shards: a shard's records and beats, ${size} fans a call (fan-records-5.lua 'join')`,
            100,
            100 * size,
            async () => {
              for (let c = 0; c < 100; c++) {
                const args: (string | number)[] = ["join", 30_000, Date.now() - 60_000, "w"];
                for (let i = 0; i < size; i++) args.push(`rec-${fan++}-${randomBytes(6).toString("hex")}`, ++place);
                const reply = await runNew<unknown[]>("records", recordKeys, args);
                // `now` alone: every fan new
                if (reply.length !== 1) throw new Error(`records join: ${JSON.stringify(reply.slice(0, 5))}`);
              }
            },
          ),
        );
      }
    }

    // Admission, by name (the tick reads each place's fan and record and opens its session) and by
    // claims (WAITING_ROOM_CLAIMS: the tick offers places by count, each fan's poll claims): the
    // ticks that move the cursor over BENCH_ADMITS waiting fans, then every fan's poll that learns
    // it is admitted. Each room's fans joined with the line stopped (rate 0), then the rate is set.
    for (const claims of [false, true]) {
      const admitter = createWaitingRoom({
        redis,
        secret: randomBytes(32).toString("hex"),
        lineCache: false,
        ...(claims ? { claims } : {}),
      });
      const evt = `instr_adm_${claims ? "c" : "n"}_${randomBytes(3).toString("hex")}`;
      const made = await admitter.configure(evt, {
        onSaleAt: Date.now() - 1_000,
        admitPerSecond: 0,
        maxActive: env.BENCH_ADMITS + 10,
        sessionSeconds: 900,
      });
      if (!made.ok) throw new Error(`configure: ${JSON.stringify(made)}`);
      const ids = Array.from({ length: env.BENCH_ADMITS }, (_, i) => `adm-${i}-${randomBytes(4).toString("hex")}`);
      for (let i = 0; i < ids.length; i += 64) {
        await Promise.all(ids.slice(i, i + 64).map((id) => admitter.join(evt, id)));
      }
      const set = await admitter.updateSettings(evt, { admitPerSecond: 100_000 });
      if (!set.ok) throw new Error(`updateSettings: ${JSON.stringify(set)}`);
      await sleep(Math.ceil((env.BENCH_ADMITS * 1000) / 100_000) + 20); // the budget for all of them
      const how = claims ? "by claims (offers)" : "by name";
      let ticks = 0;
      rows.push(
        await phase(
          `admission ${how}: the ticks that reach ${env.BENCH_ADMITS} fans (snapshot-8.lua)`,
          1,
          ids.length,
          async () => {
            for (;;) {
              const stats = await admitter.stats(evt);
              if (!stats.ok) throw new Error(`stats: ${JSON.stringify(stats)}`);
              ticks += 1;
              if (stats.stats.admitted + stats.stats.offered >= ids.length) break;
            }
          },
        ),
      );
      const tickRow = rows[rows.length - 1]!;
      tickRow.instructionsPerCall = Math.round(tickRow.instructionsPerCall / ticks);
      tickRow.calls = ticks;
      rows.push(
        await phase(
          `admission ${how}: each fan's poll that learns it (status-10.lua)`,
          ids.length,
          ids.length,
          async () => {
            for (let i = 0; i < ids.length; i += 50) {
              const polled = await Promise.all(ids.slice(i, i + 50).map((id) => admitter.statusOf(evt, id)));
              for (const p of polled)
                if (!p.ok || p.place.status !== "admitted") throw new Error(`poll: ${JSON.stringify(p)}`);
            }
          },
        ),
      );
      await admitter.close();
    }

    const version = (await redis.info("server")).match(/redis_version:(\S+)/)?.[1] ?? "?";
    process.stdout.write(
      `redis-server ${version} under callgrind; instructions less the server's idle (${Math.round(idlePerMs * 1000)}/s)\n`,
    );
    console.table(
      rows.map((r) => ({
        operation: r.operation,
        calls: r.calls,
        fans: r.fans,
        "instructions/call": r.instructionsPerCall.toLocaleString("en-US"),
        "instructions/fan": r.instructionsPerFan.toLocaleString("en-US"),
      })),
    );
    if (env.BENCH_PROFILE_DIR) process.stdout.write(`callgrind dumps of each phase in ${env.BENCH_PROFILE_DIR}\n`);
    process.stdout.write(`${JSON.stringify({ bench: "redis-instructions", redisVersion: version, rows })}\n`);
  } finally {
    redis.disconnect();
    if (server.exitCode === null) {
      const exited = new Promise((r) => server.once("exit", r));
      server.kill("SIGTERM");
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
