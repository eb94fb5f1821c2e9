/**
 * The lottery page (/lottery) in headless Chromium against a real gateway (Redis, DynamoDB): a
 * drawn pre-queue of some hundreds of fans is recomputed in the browser and PASSes, a fan finds
 * the place the gateway gave them (prefilled from the fan page's storage), a fan id that never
 * joined is told so; the same pre-queue tampered with in Redis after the draw (two places swapped)
 * FAILs on the order at place 1; before the draw the page shows the commitment; an unknown event
 * and an unreachable gateway are said in words; and with its Web Worker blocked the page checks
 * in batches itself. The drand round the draw takes (a test chain's key signs it) is shown, the
 * page and the fan page say the draw waits for it after the close, and after a Redis wipe the
 * draw sealed in DynamoDB still PASSes.
 */
import { Redis } from "ioredis";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  ADMIN_TOKEN,
  createTable,
  eventInput,
  keepPlaces,
  type Gateway,
  listen,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { randomnessOf } from "../../src/lottery/drand.js";
import { commitmentOf, generateSeed, lotteryOrder } from "../../src/waiting-room/index.js";
import { type TestChain, testChain } from "../support/drand-chain.js";
import { expectAccessible } from "./axe.js";
import {
  ensurePagesBuilt,
  keepFanId,
  keptFanId,
  patient,
  screenshot,
  sharedChromium,
  type TestBrowser,
  watchErrors,
} from "./browser.js";

let gw: Gateway;
let server: Awaited<ReturnType<typeof listen>>;
let redis: Redis;
let browser: TestBrowser | undefined;

beforeAll(async () => {
  ensurePagesBuilt();
  browser = await sharedChromium();
  gw = await startGateway({ tableName: await createTable() });
  server = await listen(gw);
  redis = new Redis(inject("redisUrl"));
}, 120_000);

afterAll(async () => {
  redis?.disconnect();
  await browser?.close();
  await server?.close();
  await gw?.close();
});

const PATIENCE = { timeout: 30_000, interval: 100 };

interface Joined {
  fanId: string;
  queueToken: string;
}

/** An event whose pre-queue holds these fans, not drawn yet; nobody is admitted (places stay put). */
async function preQueue(fanIds: string[], chain?: TestChain): Promise<{ eventId: string; joined: Joined[] }> {
  const eventId = uniqueId("lp");
  const input = eventInput({
    onSaleAt: new Date(Date.now() + 3_600_000).toISOString(),
    waitingRoom: { admitPerSecond: 0, maxActive: 100, sessionSeconds: 600, drand: chain?.chain },
  });
  expect((await putEvent(gw, eventId, input)).status).toBe(201);
  // The fans joined through the API below never poll; a journey slowed by CI load can outlast the
  // default 60 s after which an unpolled place is given up.
  await keepPlaces(gw, eventId);
  const joined = await Promise.all(
    fanIds.map(async (fanId) => {
      const res = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } });
      expect(res.status).toBe(201);
      return { fanId, queueToken: ((await res.json()) as { queueToken: string }).queueToken };
    }),
  );
  return { eventId, joined };
}

async function draw(eventId: string): Promise<void> {
  const opened = await gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ADMIN_TOKEN });
  expect(opened.status).toBe(200);
  await expect
    .poll(async () => {
      const info = (await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as {
        lottery: { seed?: string };
      };
      return typeof info.lottery.seed;
    }, PATIENCE)
    .toBe("string");
}

/** The drand round the event's draw takes, as the queue info announces it. */
async function roundOf(eventId: string): Promise<number> {
  const info = (await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as {
    lottery: { drand: { round: number } };
  };
  return info.lottery.drand.round;
}

/** The place the gateway gives the fan (queue status). */
async function positionOf(eventId: string, fan: Joined): Promise<number> {
  const res = await gw.request(`/v1/events/${eventId}/queue/status`, { token: fan.queueToken });
  expect(res.status).toBe(200);
  return ((await res.json()) as { position: number }).position;
}

async function checkStates(page: Page): Promise<Record<string, string | null>> {
  const items = page.locator("#checks li");
  const out: Record<string, string | null> = {};
  for (let i = 0; i < (await items.count()); i++) {
    const li = items.nth(i);
    out[(await li.getAttribute("data-check")) ?? "?"] = await li.getAttribute("data-state");
  }
  return out;
}

const ALL_PASS = { commitment: "pass", entriesWellFormed: "pass", size: "pass", membershipHash: "pass", order: "pass" };

describe("the lottery page", () => {
  it("is served like the other pages, with their security headers", async () => {
    for (const path of ["/lottery", "/lottery.html"]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/html");
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(await res.text()).toContain("Check the draw");
    }
    const slash = await fetch(`${server.url}/lottery/`, { redirect: "manual" });
    expect(slash.status).toBe(301);
    expect(slash.headers.get("location")).toBe("/lottery");
  });

  it("recomputes an honest draw (PASS) and finds each fan's place as the gateway gave it", async () => {
    const fanIds = [...Array.from({ length: 400 }, (_, i) => `fan-${i}`), "ファン-🎟️"];
    const { eventId, joined } = await preQueue(fanIds);
    await draw(eventId);
    const me = joined[123]!;
    const utf8 = joined[joined.length - 1]!;
    const myPosition = await positionOf(eventId, me);
    const utf8Position = await positionOf(eventId, utf8);
    expect(myPosition).toBeGreaterThan(0);

    const context = await browser!.get().newContext({ viewport: { width: 1000, height: 1000 } });
    // The fan page remembered this fan's id on the device (storage.ts): the lottery page offers it.
    await context.addInitScript(
      `localStorage.setItem(${JSON.stringify(`onsale.fanId.${eventId}`)}, ${JSON.stringify(me.fanId)})`,
    );
    try {
      const page = await context.newPage();
      patient(page);
      const errors = watchErrors(page);
      const workers: string[] = [];
      page.on("worker", (worker) => workers.push(worker.url()));

      // The fan page links to the check of its own event.
      await page.goto(`${server.url}/?event=${eventId}`);
      const link = `${server.url}/lottery.html?event=${eventId}`;
      const href = async () =>
        new URL((await page.locator("#lottery-link").getAttribute("href")) ?? "", page.url()).href;
      await expect.poll(href, PATIENCE).toBe(link);
      await page.goto(link);

      await expect.poll(() => page.locator("#verdict").textContent(), PATIENCE).toContain("PASS");
      expect(await checkStates(page)).toEqual(ALL_PASS);
      // The checks ran in the lottery worker, off the page's thread.
      expect(workers.some((url) => /\/assets\/lottery-worker-[A-Z0-9]+\.js$/.test(url))).toBe(true);
      expect(await page.locator("#verify-progress").textContent()).toBe(
        `Done: ${fanIds.length} entries checked in this browser`,
      );
      expect(await page.locator("#draw-size").textContent()).toBe(`${fanIds.length} fans`);

      // The page asks for no fan id: it takes the one this device kept for the event.
      expect(await page.locator("#place input").count()).toBe(0);
      await page.getByRole("button", { name: "Find my place" }).click();
      await expect
        .poll(() => page.locator("#place-position").textContent(), PATIENCE)
        .toBe(`Your drawn position: #${myPosition}`);
      await screenshot(page, "lottery-1-pass");
      await expectAccessible(page, "the lottery page, every check passed, a place found");

      // Another fan's device (its kept id, read at the press).
      await keepFanId(page, eventId, utf8.fanId);
      await page.getByRole("button", { name: "Find my place" }).click();
      await expect
        .poll(() => page.locator("#place-position").textContent(), PATIENCE)
        .toBe(`Your drawn position: #${utf8Position}`);

      await keepFanId(page, eventId, "never-joined");
      await page.getByRole("button", { name: "Find my place" }).click();
      await expect
        .poll(() => page.locator("#place-result").textContent(), PATIENCE)
        .toContain("The fan id this browser joined with is not in the pre-queue");
      await expectAccessible(page, "the lottery page, a fan id not in the pre-queue");
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  it("FAILs a pre-queue tampered with in Redis after the draw, at the place it was changed", async () => {
    const { eventId } = await preQueue(Array.from({ length: 300 }, (_, i) => `tamper-${i}`));
    await draw(eventId);
    // Places 1 and 2 swapped: the membership (and so M) is unchanged, only the order is not.
    const pre = `wr:{evt:${eventId}}:pre`;
    const [first, one, second, two] = await redis.zrange(pre, "0", "1", "WITHSCORES");
    expect([Number(one), Number(two)]).toEqual([1, 2]);
    await redis.zadd(pre, 2, first!, 1, second!);

    const context = await browser!.get().newContext({ viewport: { width: 1000, height: 1000 } });
    try {
      const page = await context.newPage();
      patient(page);
      const errors = watchErrors(page);
      await page.goto(`${server.url}/lottery?event=${eventId}`);
      await expect.poll(() => page.locator("#verdict").textContent(), PATIENCE).toContain("FAIL");
      expect(await checkStates(page)).toEqual({ ...ALL_PASS, order: "fail" });
      expect(await page.locator("#verdict").textContent()).toContain(
        "The published order departs from the draw at position 1.",
      );
      // The fan moved down is told where the draw put them, and where the list has them.
      const moved = await redis.zrange(pre, "1", "1");
      expect(moved[0]).toBe(first);
      await keepFanId(page, eventId, first!);
      await page.getByRole("button", { name: "Find my place" }).click();
      await expect
        .poll(() => page.locator("#place-result").textContent(), PATIENCE)
        .toContain("Your drawn position: #1 (but the box office's list has you at #2)");
      await screenshot(page, "lottery-2-fail");
      await expectAccessible(page, "the lottery page, a check failed");
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  it("shows the drand round and its value, and still PASSes the draw sealed in DynamoDB after Redis lost the room", async () => {
    const chain = testChain();
    const { eventId } = await preQueue(
      Array.from({ length: 200 }, (_, i) => `beacon-${i}`),
      chain,
    );
    const opened = await gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ADMIN_TOKEN });
    expect(opened.status).toBe(200);
    const round = await roundOf(eventId);
    const signed = chain.sign(round);
    const value = randomnessOf(signed.signature);
    const recorded = await gw.request(`/v1/admin/events/${eventId}/waiting-room/beacon`, {
      method: "PUT",
      token: ADMIN_TOKEN,
      json: signed,
    });
    expect(recorded.status).toBe(200);
    await draw(eventId);

    const context = await browser!.get().newContext({ viewport: { width: 1000, height: 1000 } });
    try {
      const page = await context.newPage();
      patient(page);
      const errors = watchErrors(page);
      await page.goto(`${server.url}/lottery?event=${eventId}`);
      await expect.poll(() => page.locator("#verdict").textContent(), PATIENCE).toContain("PASS");
      expect(await page.locator("#draw-beacon").textContent()).toBe(value);
      expect(await page.locator("#draw-beacon-source").textContent()).toBe(
        `from drand chain ${chain.chain.chainHash} round ${round}`,
      );
      expect(await page.locator("#draw-sealed").isVisible()).toBe(false);

      // Redis loses every key of the event's line: the info and the pages come from the sealed draw.
      const keys = await redis.keys(`wr:{evt:${eventId}}*`);
      expect(keys.length).toBeGreaterThan(0);
      await redis.del(...keys);
      await page.reload();
      await expect.poll(() => page.locator("#verdict").textContent(), PATIENCE).toContain("PASS");
      expect(await checkStates(page)).toEqual({ ...ALL_PASS, beacon: "pass" });
      expect(await page.locator("#draw-sealed").isVisible()).toBe(true);
      expect(await page.locator("#draw-beacon").textContent()).toBe(value);
      await screenshot(page, "lottery-4-sealed");
      await expectAccessible(page, "the lottery page, the sealed draw with its beacon");
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  it("after the close says the draw waits for its drand round (and the fan page says why), then PASSes once it came", async () => {
    const chain = testChain();
    const { eventId } = await preQueue(
      Array.from({ length: 20 }, (_, i) => `wait-${i}`),
      chain,
    );
    const opened = await gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ADMIN_TOKEN });
    expect(opened.status).toBe(200);
    const round = await roundOf(eventId);
    const context = await browser!.get().newContext();
    try {
      const page = await context.newPage();
      patient(page);
      const errors = watchErrors(page);
      await page.goto(`${server.url}/lottery?event=${eventId}`);
      await page.locator("#draw-beacon-wait").waitFor({ state: "visible" });
      expect(await page.locator("#draw-beacon-wait-source").textContent()).toBe(
        `drand chain ${chain.chain.chainHash} round ${round}`,
      );
      expect(await page.locator("#verify").isVisible()).toBe(false);
      await expectAccessible(page, "the lottery page, the draw waiting for its beacon");

      // The fan page says why the draw is late.
      await page.goto(`${server.url}/?event=${eventId}`);
      await expect
        .poll(() => page.locator("#lottery-beacon").textContent(), PATIENCE)
        .toContain(`The draw is waiting for round ${round} of the drand chain`);

      const beacon = await gw.request(`/v1/admin/events/${eventId}/waiting-room/beacon`, {
        method: "PUT",
        token: ADMIN_TOKEN,
        json: chain.sign(round),
      });
      expect(beacon.status).toBe(200);
      await draw(eventId);
      await page.goto(`${server.url}/lottery?event=${eventId}`);
      await expect.poll(() => page.locator("#verdict").textContent(), PATIENCE).toContain("PASS");
      expect(await page.locator("#draw-beacon-wait").isVisible()).toBe(false);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it("checks the seed against the commitment the fan page recorded at join: a rewritten seed and commitment FAIL", async () => {
    const fanIds = Array.from({ length: 30 }, (_, i) => `kept-${i}`);
    const { eventId } = await preQueue(fanIds);
    const context = await browser!.get().newContext({ viewport: { width: 1000, height: 1000 } });
    try {
      const page = await context.newPage();
      patient(page);
      const errors = watchErrors(page);
      // The fan joins on the fan page, asked for nothing: it keeps the fan id the gateway issued
      // and the commitment the join answered with.
      await page.goto(`${server.url}/?event=${eventId}`);
      await page.getByRole("button", { name: "Join the line" }).click();
      const served = (await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as {
        lottery: { commitment: string };
      };
      await expect
        .poll(() => page.evaluate<string | null>(`localStorage.getItem("onsale.commitment.${eventId}")`), PATIENCE)
        .toBe(served.lottery.commitment);
      const mine = await keptFanId(page, eventId);
      expect(mine).toMatch(/^f\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{16}$/);
      await draw(eventId);

      // The operator rewrites the seed and its commitment in Redis, and the places to match.
      const room = `wr:{evt:${eventId}}:room`;
      const [beacon] = await redis.hmget(room, "beacon");
      const forged = generateSeed();
      await redis.hset(room, "seed", forged, "commitment", commitmentOf(forged));
      const order = lotteryOrder(forged, [...fanIds, mine!], beacon ?? "");
      await redis.zadd(`wr:{evt:${eventId}}:pre`, ...order.flatMap((fanId, i) => [i + 1, fanId]));

      await page.goto(`${server.url}/lottery?event=${eventId}`);
      await expect.poll(() => page.locator("#verdict").textContent(), PATIENCE).toContain("FAIL");
      expect(await checkStates(page)).toEqual({ ...ALL_PASS, commitment: "fail" });
      expect(await page.locator("#draw-recorded").textContent()).toBe(served.lottery.commitment);
      expect(await page.locator("#draw-recorded-note").textContent()).toContain("NOT the one published now");
      // The fan's place, from the id the fan page kept (hashed here): where the list has it.
      await page.getByRole("button", { name: "Find my place" }).click();
      await expect
        .poll(() => page.locator("#place-position").textContent(), PATIENCE)
        .toBe(`Your drawn position: #${order.indexOf(mine!) + 1}`);
      await expectAccessible(page, "the lottery page, a commitment that moved");
      expect(errors).toEqual([]);

      // A device that recorded nothing can only check against what is served now: that agrees.
      const fresh = await browser!.get().newContext();
      try {
        const other = await fresh.newPage();
        patient(other);
        await other.goto(`${server.url}/lottery?event=${eventId}`);
        await expect.poll(() => other.locator("#verdict").textContent(), PATIENCE).toContain("PASS");
        expect(await other.locator("#draw-recorded-row").isVisible()).toBe(false);
      } finally {
        await fresh.close();
      }
    } finally {
      await context.close();
    }
  }, 120_000);

  it("before the draw shows the commitment and says when the seed comes", async () => {
    const { eventId } = await preQueue(["early-1", "early-2"]);
    const info = (await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as {
      lottery: { commitment: string };
    };
    const context = await browser!.get().newContext();
    try {
      const page = await context.newPage();
      patient(page);
      const errors = watchErrors(page);
      await page.goto(`${server.url}/lottery?event=${eventId}`);
      await expect.poll(() => page.locator("#draw-commitment").textContent(), PATIENCE).toBe(info.lottery.commitment);
      await page.getByText("The seed is revealed when the pre-queue closes").waitFor();
      expect(await page.locator("#verify").isVisible()).toBe(false);
      // A browser that never joined has no place to look up, and is told so.
      expect(await page.locator("#place-hint").textContent()).toContain("This browser hasn't joined this event's line");
      await page.getByRole("button", { name: "Find my place" }).click();
      await expect
        .poll(() => page.locator("#place-result").textContent(), PATIENCE)
        .toContain("there is no place of yours to look up here");
      await keepFanId(page, eventId, "early-1");
      await page.getByRole("button", { name: "Find my place" }).click();
      await expect
        .poll(() => page.locator("#place-result").textContent(), PATIENCE)
        .toContain("The draw has not happened yet.");
      await expectAccessible(page, "the lottery page before the draw");
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it("says so for an unknown event and for a gateway it cannot reach, recovers on Try again, and checks without its worker", async () => {
    const { eventId } = await preQueue(["a", "b", "c"]);
    await draw(eventId);
    const context = await browser!.get().newContext();
    try {
      const page = await context.newPage();
      patient(page);
      await page.goto(`${server.url}/lottery?event=no_such_event`);
      await page.getByText('There is no on-sale called "no_such_event".').waitFor();
      await expectAccessible(page, "the lottery page of an unknown event");

      // The gateway gone (no answer to any API call) once the page is loaded.
      await page.route("**/v1/**", (route) => route.abort("connectionrefused"));
      await page.goto(`${server.url}/lottery?event=${eventId}`);
      await page.getByText("We can't reach the box office right now.").waitFor();
      await screenshot(page, "lottery-3-unreachable");
      await expectAccessible(page, "the lottery page, the gateway unreachable");
      await page.unroute("**/v1/**");
      await page.getByRole("button", { name: "Try again" }).click();
      await expect.poll(() => page.locator("#verdict").textContent(), PATIENCE).toContain("PASS");

      // Without its worker (the asset cannot be loaded), the page runs the checks itself.
      await page.route("**/assets/lottery-worker-*", (route) => route.abort("failed"));
      await page.reload();
      await expect.poll(() => page.locator("#verdict").textContent(), PATIENCE).toContain("PASS");
      expect(await checkStates(page)).toEqual(ALL_PASS);
    } finally {
      await context.close();
    }
  }, 60_000);
});
