/**
 * The fan page against a line that keeps bots out (issue 18 item 3), in headless Chromium against
 * a real gateway: it solves the proof-of-work challenge in a Web Worker and joins, and it passes
 * the invite from its address (`?invite=`).
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, it } from "vitest";
import { mintInvite } from "../../src/waiting-room/invites.js";
import {
  ADMIN_TOKEN,
  createTable,
  eventInput,
  type Gateway,
  listen,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { expectAccessible } from "./axe.js";
import { ensurePagesBuilt, keepFanId, keptFanId, screenshot, sharedChromium, type TestBrowser } from "./browser.js";

const INVITE_SECRET = "operator-invite-secret-0123456789-abcdef";

let gw: Gateway;
let server: { url: string; close(): Promise<void> };
let browser: TestBrowser | undefined;

beforeAll(async () => {
  ensurePagesBuilt();
  browser = await sharedChromium();
  gw = await startGateway({ tableName: await createTable(), invites: { secret: INVITE_SECRET } });
  server = await listen(gw);
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await gw?.close();
});

async function newPage() {
  if (!browser) throw new Error("the browser was not started");
  return browser.newPage();
}

const PATIENCE = { timeout: 30_000, interval: 100 };

async function newEvent(settings: Record<string, unknown>): Promise<string> {
  const eventId = uniqueId("pw");
  // Far from the on-sale, so the fan stays in the pre-queue where the page shows the place.
  const onSaleAt = new Date(Date.now() + 3_600_000).toISOString();
  const put = await putEvent(gw, eventId, eventInput({ onSaleAt }));
  if (put.status !== 201) throw new Error(`put: ${put.status}`);
  const res = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
    method: "PATCH",
    json: settings,
    token: ADMIN_TOKEN,
  });
  if (res.status !== 200) throw new Error(`patch: ${res.status} ${await res.text()}`);
  return eventId;
}

async function joined(eventId: string): Promise<number> {
  const stats = await gw.deps.waitingRoom.stats(eventId);
  if (!stats.ok) throw new Error(stats.reason);
  return stats.stats.joined;
}

/**
 * Presses Join on a fresh device, as a fan does (the gateway issues the fan id); with `fanId`, as a
 * device that kept that id for the event (storage.ts).
 */
async function join(page: Page, url: string, fanId?: string) {
  await page.goto(url);
  const eventId = new URL(url).searchParams.get("event")!;
  if (fanId !== undefined) await keepFanId(page, eventId, fanId);
  await page.getByRole("button", { name: "Join the line" }).click();
}

const ISSUED = /^f\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{16}$/;

describe.concurrent("the fan page keeps bots out", () => {
  it("solves the proof-of-work challenge in a Web Worker, then joins", async ({ expect }) => {
    const eventId = await newEvent({ powBits: 12 });
    const { page, errors } = await newPage();
    const workers: string[] = [];
    page.on("worker", (w) => workers.push(w.url()));
    // A fresh device: the challenge issues the fan id the proof is bound to, and the page keeps it.
    await join(page, `${server.url}/?event=${eventId}`);
    await expect.poll(() => page.locator("#wait-status").textContent(), PATIENCE).toBe("In the pre-queue");
    expect(workers.some((u) => /\/assets\/pow-worker-[A-Z0-9]+\.js$/.test(u))).toBe(true);
    expect(await joined(eventId)).toBe(1);
    expect(await keptFanId(page, eventId)).toMatch(ISSUED);
    await screenshot(page, "fan-pow-joined");
    await expectAccessible(page, "fan-pow-joined");
    expect(errors).toEqual([]);
  });

  it("passes ?invite= on join; without one the page says the line is for invited fans", async ({ expect }) => {
    const eventId = await newEvent({ invites: true });
    const uninvited = await newPage();
    await join(uninvited.page, `${server.url}/?event=${eventId}`);
    await uninvited.page.getByText("This line is open to invited fans only.").waitFor();
    expect(await joined(eventId)).toBe(0);

    const token = mintInvite(
      { eventId, identity: "person-1", exp: Math.floor(Date.now() / 1000) + 600 },
      { secret: INVITE_SECRET },
    );
    const invited = await newPage();
    await join(invited.page, `${server.url}/?event=${eventId}&invite=${token}`);
    await expect.poll(() => invited.page.locator("#wait-status").textContent(), PATIENCE).toBe("In the pre-queue");
    expect(await joined(eventId)).toBe(1);
    const held = await keptFanId(invited.page, eventId);
    expect(held).toMatch(ISSUED);

    // The same person on a second device, which kept an id of its own for this event: the invite
    // names the person, so the page ends with the place the first device holds, not a second one.
    const second = await newPage();
    await join(second.page, `${server.url}/?event=${eventId}&invite=${token}`, "fan-second-device");
    await expect.poll(() => second.page.locator("#wait-status").textContent(), PATIENCE).toBe("In the pre-queue");
    expect(await keptFanId(second.page, eventId)).toBe(held);
    expect(await joined(eventId)).toBe(1);
    expect(second.errors).toEqual([]);
    expect(invited.errors).toEqual([]);
  });
});
