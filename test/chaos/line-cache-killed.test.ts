/**
 * A gateway SIGKILLed while it owes the heartbeats of the polls it answered from its line cache
 * (src/waiting-room/line-view.ts sends them in one call per event every 100 ms).
 *
 * Two gateway processes. Fans join and poll through gateway A, which answers their polls from its
 * view of the line; right after a round of polls A is killed, so that round's heartbeats are lost
 * with it. Then the fans who keep polling do so, as the advice says, through gateway B, which has
 * never seen them: B asks Redis for their first poll (recording it), then answers from its own
 * cache. What must hold: no fan who follows the advice loses the place (the advice keeps polls
 * within a third of abandonSeconds, and a fan unknown to a gateway is asked of Redis), and the fans
 * who stopped do lose it, never before abandonSeconds after their last poll.
 */
import { Redis } from "ioredis";
import { afterAll, describe, expect, it, onTestFailed } from "vitest";
import { waitingRoomKeys } from "../../src/waiting-room/index.js";
import { eventInput, uniqueId } from "../gateway/harness.js";
import { ADMIN_TOKEN, type Cluster, sleep, startCluster } from "./support/cluster.js";

const ABANDON_SECONDS = 6;
const FANS = 12;
const LEAVERS = 4;

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
});

async function call<T>(url: string, path: string, init: { method?: string; token?: string; json?: unknown } = {}) {
  const res = await fetch(`${url}${path}`, {
    method: init.method ?? "GET",
    headers: {
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...(init.json !== undefined ? { "content-type": "application/json" } : {}),
    },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  return { status: res.status, body: (await res.json()) as T };
}

async function cachedPolls(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^gateway_queue_polls_total\{answered="cache"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

interface Place {
  status: string;
  position: number;
  pollAfterMs?: number;
  pollAfterSeconds: number;
}

describe("chaos: a gateway killed with the heartbeats of its cached polls unsent", () => {
  it("fans who follow the advice keep their places through another gateway; those who stopped lose them", async () => {
    cluster = await startCluster({ gateways: 2, worker: false });
    const c = cluster;
    onTestFailed(() => console.log(c.recentLogs()));
    const [a, b] = c.gateways.map((g) => g.url!);
    const eventId = uniqueId("lk");
    // One session, taken by the first fan: everyone else waits, and the cursor stands still.
    await c.putEvent(eventId, eventInput({ waitingRoom: { admitPerSecond: 1, maxActive: 1, sessionSeconds: 600 } }));
    const patched = await call(a!, `/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ADMIN_TOKEN,
      json: { abandonSeconds: ABANDON_SECONDS },
    });
    expect(patched.status).toBe(200);

    const tokens: string[] = [];
    for (let i = 0; i < FANS; i++) {
      const joined = await call<{ queueToken: string }>(a!, `/v1/events/${eventId}/queue`, {
        method: "POST",
        json: { fanId: `lk-fan-${i}` },
      });
      expect(joined.status).toBe(201);
      tokens.push(joined.body.queueToken);
    }
    const poll = (url: string, i: number) =>
      call<Place>(url, `/v1/events/${eventId}/queue/status`, { token: tokens[i] });

    // Rounds of polls through A, every 700 ms (inside a third of abandonSeconds), all in flight at
    // once, until A has answered some from its cache.
    const before = await cachedPolls(a!);
    const lastPollAt = new Map<number, number>();
    /** The poll before the last: the last whose heartbeat surely reached Redis (A's was lost). */
    const prevPollAt = new Map<number, number>();
    const deadline = Date.now() + 20_000;
    while ((await cachedPolls(a!)) - before < FANS && Date.now() < deadline) {
      await Promise.all(
        tokens.map(async (_t, i) => {
          const p = await poll(a!, i);
          expect(p.status).toBe(200);
          lastPollAt.set(i, Date.now());
        }),
      );
      await sleep(700);
    }
    expect((await cachedPolls(a!)) - before).toBeGreaterThanOrEqual(FANS);
    // One more round, then A dies at once: those heartbeats were owed, not sent.
    await sleep(700);
    for (const [i, at] of lastPollAt) prevPollAt.set(i, at);
    await Promise.all(
      tokens.map(async (_t, i) => {
        expect((await poll(a!, i)).status).toBe(200);
        lastPollAt.set(i, Date.now());
      }),
    );
    await c.killGateway(0, "SIGKILL");
    const killedAt = Date.now();

    const redis = new Redis(c.redisUrl);
    try {
      const k = waitingRoomKeys(eventId);
      // The last LEAVERS fans stop (far back: their polls were A's cached ones); the others go on
      // through B.
      const leavers = Array.from({ length: LEAVERS }, (_, n) => FANS - LEAVERS + n);
      const keepers = tokens.map((_t, i) => i).filter((i) => i > 0 && !leavers.includes(i));
      const lostAt = new Map<number, number>();
      const watch = async () => {
        const records = await redis.hmget(k.fans, ...leavers.map((i) => `lk-fan-${i}`));
        records.forEach((r, n) => {
          if (r?.startsWith("x|") && !lostAt.has(leavers[n]!)) lostAt.set(leavers[n]!, Date.now());
        });
      };
      const until = killedAt + (ABANDON_SECONDS + 4) * 1000;
      const keeping = Promise.all(
        keepers.map(async (i) => {
          while (Date.now() < until) {
            const p = await poll(b!, i);
            expect(p.status).toBe(200);
            expect(p.body.status, `fan ${i}`).toBe("waiting");
            const wait = p.body.pollAfterMs ?? p.body.pollAfterSeconds * 1000;
            expect(wait).toBeLessThanOrEqual((ABANDON_SECONDS / 3) * 1000);
            await sleep(Math.min(wait, 1_500));
          }
        }),
      );
      while (Date.now() < until) {
        await watch();
        await sleep(100);
      }
      await keeping;
      await watch();

      for (const i of keepers) {
        expect((await redis.hget(k.fans, `lk-fan-${i}`))?.startsWith("w|"), `fan ${i} kept the place`).toBe(true);
      }
      for (const i of leavers) {
        const lost = lostAt.get(i);
        expect(lost, `fan ${i} lost the place`).toBeDefined();
        // Never before abandonSeconds after the last poll whose heartbeat reached Redis; the last
        // one's went with A, so the place may go up to one poll interval sooner than abandonSeconds
        // after the fan's very last poll.
        expect(lost! - prevPollAt.get(i)!).toBeGreaterThanOrEqual(ABANDON_SECONDS * 1000 - 50);
        console.log(
          `fan ${i}: place lost ${lost! - lastPollAt.get(i)!} ms after its last poll (its heartbeat lost with A), ` +
            `${lost! - prevPollAt.get(i)!} ms after the one before`,
        );
      }
      // B answered the keepers from its own cache once it had asked Redis about each.
      expect(await cachedPolls(b!)).toBeGreaterThan(0);
    } finally {
      redis.disconnect();
    }
  });
});
