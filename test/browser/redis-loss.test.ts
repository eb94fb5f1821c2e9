/**
 * The fan's waiting-room page through a Redis loss, in headless Chromium: the gateway's own
 * redis-server is killed while the fan waits in line (the page says it is reconnecting and keeps
 * the fan on the waiting view), then started again empty (the page gets a place in the restored
 * line and says so), and the operator's admission then lets the fan through to the seat map.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
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
import { killRedis, restartRedis } from "../support/redis-loss.js";
import { expectAccessible } from "./axe.js";
import {
  ensurePagesBuilt,
  keepFanId,
  patient,
  screenshot,
  sharedChromium,
  type TestBrowser,
  watchErrors,
} from "./browser.js";

let redis: SpawnedRedis;
let gw: Gateway;
let server: { url: string; close(): Promise<void> };
let browser: TestBrowser | undefined;

beforeAll(async () => {
  ensurePagesBuilt();
  browser = await sharedChromium();
  redis = await spawnRedis();
  gw = await startGateway({ tableName: await createTable(), redisUrl: redis.url });
  server = await listen(gw);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await gw?.close();
  await redis?.close();
});

const PATIENCE = { timeout: 30_000, interval: 100 };

describe("the fan's page when Redis is lost", () => {
  it("says it is reconnecting while Redis is down, then shows the place in the restored line", async () => {
    const eventId = uniqueId();
    const input = eventInput({
      sections: [{ id: "A", tier: "Floor", price: 15000, rows: 2, seatsPerRow: 8 }],
      generalAdmission: [],
      // Nobody is admitted until the operator says so: the fan stays in line through the loss.
      waitingRoom: { admitPerSecond: 0, maxActive: 100, sessionSeconds: 600 },
    });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    // The fans joined through the API below never poll; a journey slowed by CI load can outlast the
    // default 60 s after which an unpolled place is given up.
    await keepPlaces(gw, eventId);
    for (const fanId of ["first", "second"]) {
      const res = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } });
      expect(res.status).toBe(201);
    }

    const context = await browser!.get().newContext({ viewport: { width: 1100, height: 900 } });
    try {
      const page = await context.newPage();
      patient(page);
      const errors = watchErrors(page);
      await page.goto(`${server.url}/?event=${eventId}`);
      await keepFanId(page, eventId, "patient-fan");
      await page.getByRole("button", { name: "Join the line" }).click();
      await expect.poll(() => page.locator("#wait-position").textContent(), PATIENCE).toBe("#3");

      const commitmentBefore = await page.locator("#lottery-commitment").textContent();
      expect(commitmentBefore).toMatch(/^[0-9a-f]{64}$/);
      await killRedis(redis, [gw]);
      await page.getByText("Reconnecting to the line…").waitFor({ timeout: 30_000 });
      // Still on the waiting view, not thrown back to the start.
      expect(await page.locator("#wait-position").isVisible()).toBe(true);
      await screenshot(page, "fan-redis-1-reconnecting");
      await expectAccessible(page, "fan-redis-1-reconnecting");

      redis = await restartRedis(redis.port, [gw]);
      await page.getByText("The line had to be restarted after a technical problem.").waitFor({ timeout: 60_000 });
      // Nobody else came back yet: the fan is first in the restored line.
      await expect.poll(() => page.locator("#wait-position").textContent(), PATIENCE).toBe("#1");
      // The seed is committed in DynamoDB once per event, so the restored line shows the same
      // commitment the page showed before the loss: a wipe cannot re-roll the draw unseen.
      await expect.poll(() => page.locator("#lottery-commitment").textContent(), PATIENCE).toBe(commitmentBefore);
      // The restored room (its pre-queue empty) reveals the committed seed, and the page checks it.
      await expect
        .poll(() => page.locator("#lottery-check").textContent(), PATIENCE)
        .toContain("the seed, kept apart, could not change");
      await screenshot(page, "fan-redis-2-new-place");
      await expectAccessible(page, "fan-redis-2-new-place");

      // The operator lets fans in again: the page moves on to the seat map.
      const patched = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
        method: "PATCH",
        token: ADMIN_TOKEN,
        json: { admitPerSecond: 50 },
      });
      expect(patched.status).toBe(200);
      await page.getByRole("heading", { name: "Choose your seats" }).waitFor({ timeout: 60_000 });
      // A 503 while Redis was down is the expected answer; anything else the page logged is not.
      expect(errors.filter((e) => !/status of 503\b/.test(e))).toEqual([]);
    } finally {
      await context.close();
    }
  }, 240_000);
});
