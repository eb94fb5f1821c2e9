/**
 * The operator console in headless Chromium: with admission stopped (admitPerSecond 0) and fans
 * waiting after the draw, the operator raises the rate in the console, confirms, and the fans,
 * one of them a browser on a phone-sized screen, are admitted. A console opened (or reloaded)
 * later charts the line as the gateway's history kept it. The admission loop's bounds are set in
 * its form, through the same confirmation.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, it } from "vitest";
import {
  ADMIN_TOKEN,
  admitFans,
  createTable,
  eventInput,
  keepPlaces,
  type Gateway,
  listen,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { expectAccessible } from "./axe.js";
import {
  ensurePagesBuilt,
  JOURNEY_TIMEOUT_MS,
  keepFanId,
  screenshot,
  sharedChromium,
  type TestBrowser,
} from "./browser.js";

let gw: Gateway;
let server: { url: string; close(): Promise<void> };
let browser: TestBrowser | undefined;

beforeAll(async () => {
  ensurePagesBuilt();
  browser = await sharedChromium();
  gw = await startGateway({ tableName: await createTable() });
  server = await listen(gw);
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await gw?.close();
});

async function newPage(viewport: { width: number; height: number }) {
  if (!browser) throw new Error("the browser was not started");
  return browser.newPage({ viewport });
}

async function stats(eventId: string) {
  const res = await gw.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN });
  return (await res.json()) as { waiting: number; admitted: number };
}

/** expect.poll waits 1 s by default; a loaded CI machine needs more. */
const PATIENCE = { timeout: 30_000, interval: 100 };

/** Opens the console on the event and connects with the operator token, as an operator does. */
async function connect(page: Page, eventId: string) {
  await page.goto(`${server.url}/console?event=${eventId}`);
  await page.getByLabel("Operator token").fill(ADMIN_TOKEN);
  await page.getByRole("button", { name: "Connect" }).click();
  await page.getByRole("heading", { name: `Event ${eventId}` }).waitFor();
}

const readout = (page: Page, chart: string) => page.locator(`[data-chart="${chart}"]`).textContent();

describe.concurrent("the operator console in a browser", () => {
  it("raising admitPerSecond in the console admits the waiting fans", { timeout: JOURNEY_TIMEOUT_MS }, async ({
    expect,
  }) => {
    const eventId = uniqueId();
    const onSaleAt = new Date(Date.now() + 4_000).toISOString();
    const input = eventInput({
      name: "Console Night",
      onSaleAt,
      waitingRoom: { admitPerSecond: 0, maxActive: 100, sessionSeconds: 600 },
    });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    // The fans joined through the API below never poll; a journey slowed by CI load can outlast the
    // default 60 s after which an unpolled place is given up.
    await keepPlaces(gw, eventId);

    // Five fans join the pre-queue through the API; the draw puts them in a random order.
    for (const fanId of ["f1", "f2", "f3", "f4", "f5"]) {
      const res = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } });
      expect(res.status).toBe(201);
    }
    await expect
      .poll(
        async () =>
          ((await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as { state: string }).state,
        { timeout: 20_000, interval: 250 },
      )
      .toBe("paused");

    // A sixth fan joins on a phone after the draw: in line behind them, with the seed revealed and checked.
    const fan = await newPage({ width: 390, height: 844 });
    await fan.page.goto(`${server.url}/?event=${eventId}`);
    await keepFanId(fan.page, eventId, "phone-fan");
    await fan.page.getByRole("button", { name: "Join the line" }).click();
    await expect.poll(() => fan.page.locator("#wait-status").textContent(), PATIENCE).toBe("In line");
    expect(await fan.page.locator("#wait-position").textContent()).toBe("#6");
    expect(await fan.page.locator("#wait-ahead").textContent()).toBe("5");
    await fan.page.locator("#lottery-seed").waitFor();
    expect(await fan.page.locator("#lottery-verify").textContent()).toMatch(/^printf %s [0-9a-f]{64} \| sha256sum$/);
    await expect
      .poll(() => fan.page.locator("#lottery-check").textContent(), PATIENCE)
      .toContain("matches the commitment");
    expect(await fan.page.locator("#wait-eta").textContent()).toBe("Paused for now");
    // The odds (from the first status poll on): 70 seats and 100 places left, 5 ahead, nobody
    // admitted yet (so the worst case, 4 each).
    await expect.poll(() => fan.page.locator("#wait-odds").textContent(), PATIENCE).toBe("Very likely");
    expect(await fan.page.locator("#wait-odds-note").textContent()).toBe(
      "170 tickets left; 5 fans ahead of you. Too early to know how many each takes, so this assumes the most each may take.",
    );
    await screenshot(fan.page, "console-0-fan-waiting-drawn-phone");
    await expectAccessible(fan.page, "console-0-fan-waiting-drawn-phone");
    expect((await stats(eventId)).admitted).toBe(0);

    // The operator connects; the token is typed into the page.
    const op = await newPage({ width: 1280, height: 900 });
    await connect(op.page, eventId);
    await expect.poll(() => readout(op.page, "waiting"), PATIENCE).toBe("6");
    expect(await op.page.locator("#dash-state").textContent()).toBe("paused (rate 0)");
    expect(await op.page.getByLabel("Admissions per second").inputValue()).toBe("0");
    await op.page.locator("#sections-body tr").first().waitFor();
    expect(await op.page.locator("#sections-body th").allTextContents()).toEqual([
      "Section A",
      "Section B",
      "Standing GA",
    ]);

    // Nobody gets in while the rate is 0.
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await stats(eventId)).admitted).toBe(0);

    // A change needs a confirmation; Escape backs out of it and nothing changes.
    await op.page.getByLabel("Admissions per second").fill("3");
    await op.page.getByRole("button", { name: "Review change…" }).click();
    const dialog = op.page.getByRole("dialog");
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain("Admissions per second: 0 → 3");
    await op.page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    await new Promise((r) => setTimeout(r, 1_200));
    expect((await stats(eventId)).admitted).toBe(0);

    await op.page.getByRole("button", { name: "Review change…" }).click();
    await dialog.waitFor();
    await screenshot(op.page, "console-1-confirm-change");
    await expectAccessible(op.page, "console-1-confirm-change");
    await dialog.getByRole("button", { name: "Apply" }).click();
    await op.page.getByText("Applied on every gateway.").waitFor();

    // At 3 per second the six are in within a few seconds (PATIENCE bounds the wait; no wall-clock
    // assertion on a shared machine); the console's own polls move the line.
    await expect.poll(async () => (await stats(eventId)).admitted, PATIENCE).toBe(6);
    await expect.poll(() => readout(op.page, "waiting"), PATIENCE).toBe("0");
    expect(await op.page.locator("#dash-state").textContent()).toBe("open");
    expect(await op.page.locator("#dash-summary").textContent()).toContain("6 admitted so far");

    // The fan page notices at its next suggested poll and moves on to the seat map by itself.
    await fan.page.getByRole("heading", { name: "Choose your seats" }).waitFor({ timeout: 30_000 });
    await screenshot(fan.page, "console-2-fan-admitted-seat-map-phone");
    await expectAccessible(fan.page, "console-2-fan-admitted-seat-map-phone");
    await screenshot(op.page, "console-3-after-raise");
    await expectAccessible(op.page, "console-3-after-raise");

    // Pause and resume go through the same confirmation.
    await op.page.getByRole("button", { name: "Pause admission…" }).click();
    await dialog.getByRole("button", { name: "Apply" }).click();
    await expect.poll(() => op.page.locator("#dash-state").textContent(), PATIENCE).toBe("paused");
    await op.page.getByRole("button", { name: "Resume admission…" }).click();
    await dialog.getByRole("button", { name: "Apply" }).click();
    await expect.poll(() => op.page.locator("#dash-state").textContent(), PATIENCE).toBe("open");

    expect([...fan.errors, ...op.errors]).toEqual([]);
  });

  it("close the sale, revoke a fan and end the event from the console; the history says who did what", {
    timeout: JOURNEY_TIMEOUT_MS,
  }, async ({ expect }) => {
    const eventId = uniqueId();
    const input = eventInput({ waitingRoom: { admitPerSecond: 10_000, maxActive: 100, sessionSeconds: 600 } });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    const [rita] = await admitFans(gw, eventId, ["rita"]);

    const op = await newPage({ width: 1280, height: 900 });
    await connect(op.page, eventId);
    const dialog = op.page.getByRole("dialog");

    // Close the sale: confirmed in the dialog, then joins are refused
    await op.page.getByRole("button", { name: "Close the sale…" }).click();
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain("Waiting room: taking fans → closed");
    await dialog.getByRole("button", { name: "Apply" }).click();
    await op.page.getByText("The sale is closed.").waitFor();
    const join = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "too-late" } });
    expect(join.status).toBe(403);
    await expect.poll(() => op.page.locator("#dash-state").textContent(), PATIENCE).toBe("closed");

    // Revoke the admitted fan by id: her token stops at once
    await op.page.getByLabel("Fan id to revoke").fill("rita");
    await op.page.getByRole("button", { name: "Revoke…" }).click();
    await dialog.getByRole("button", { name: "Apply" }).click();
    await op.page.getByText("rita is revoked.").waitFor();
    const refused = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: rita!.accessToken,
      json: { seats: ["A-1-1"] },
    });
    expect(refused.status).toBe(401);

    // The history: the room's close with its old and new value, and every action by token name
    await expect
      .poll(() => op.page.locator("#history-settings li").first().textContent(), PATIENCE)
      .toContain("settings by default: closed 0 → 1");
    await expect
      .poll(() => op.page.locator("#history-actions li").allTextContents(), PATIENCE)
      .toEqual([
        expect.stringContaining("default POST /revocations → 200"),
        expect.stringContaining("default POST /close-sale → 200"),
        expect.stringContaining("default PUT / → 201"),
      ]);
    await screenshot(op.page, "console-5-sale-controls-history");
    await expectAccessible(op.page, "console-5-sale-controls-history");

    // End the event: holds are refused for everyone
    await op.page.getByRole("button", { name: "End the event…" }).click();
    await dialog.getByRole("button", { name: "Apply" }).click();
    await op.page.getByText("The event has ended.").waitFor();
    const view = (await (await gw.request(`/v1/admin/events/${eventId}`, { token: ADMIN_TOKEN })).json()) as {
      sale: { state: string };
    };
    expect(view.sale.state).toBe("ended");
    expect(op.errors).toEqual([]);
  });

  it("a console opened after the line moved, and reloaded, charts it from the gateway's history", {
    timeout: JOURNEY_TIMEOUT_MS,
  }, async ({ expect }) => {
    const eventId = uniqueId();
    const input = eventInput({ waitingRoom: { admitPerSecond: 0, maxActive: 100, sessionSeconds: 600 } });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    for (const fanId of ["h1", "h2", "h3", "h4"]) {
      expect((await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } })).status).toBe(201);
    }
    // The gateway's sampler takes a sample while four wait (this test's gateway runs no timer: its
    // ticks are awaited), then the four are let in: only the history remembers the line. CI once
    // saw the one tick's sample count three (not reproduced here; the cause was not found), so the
    // gateway ticks until a sample of four is in: a fan really missing from the line still fails it.
    const lastWaiting = async () => {
      gw.deps.stats.sampler.watch(eventId);
      await gw.deps.stats.sampler.tick();
      const history = await gw.request(`/v1/admin/events/${eventId}/stats/history`, { token: ADMIN_TOKEN });
      return ((await history.json()) as { samples: { waiting: number }[] }).samples.at(-1)?.waiting;
    };
    await expect.poll(lastWaiting, PATIENCE).toBe(4);
    const patched = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ADMIN_TOKEN,
      json: { admitPerSecond: 1_000 },
    });
    expect(patched.status).toBe(200);
    await expect.poll(async () => (await stats(eventId)).waiting, PATIENCE).toBe(0);

    const op = await newPage({ width: 1280, height: 900 });
    await connect(op.page, eventId);
    const queueChart = op.page.locator(".chart").first();
    await expect.poll(() => readout(op.page, "waiting"), PATIENCE).toBe("0");
    expect(await queueChart.locator(".peak").textContent()).toBe("max 4");
    expect(await queueChart.locator("title").textContent()).toMatch(/^Queue depth: now 0, highest 4 over the last/);
    expect(await op.page.locator("#sections-asof").textContent()).toMatch(/^From the authoritative store, as of /);

    // A reload (the token is kept for the tab) shows the same history at once.
    await op.page.reload();
    await op.page.getByRole("heading", { name: `Event ${eventId}` }).waitFor();
    await expect.poll(() => queueChart.locator(".peak").textContent(), PATIENCE).toBe("max 4");
    await screenshot(op.page, "console-6-history-after-reload");
    await expectAccessible(op.page, "console-6-history-after-reload");
    expect(op.errors).toEqual([]);
  });

  it("with the admission loop on, the console charts its steps and shows its settings", {
    timeout: JOURNEY_TIMEOUT_MS,
  }, async ({ expect }) => {
    const eventId = uniqueId();
    const input = eventInput({ waitingRoom: { admitPerSecond: 1, maxActive: 100, sessionSeconds: 600 } });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    const joins = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: `l${i}` } }),
      ),
    );
    expect(joins.every((r) => r.status === 201)).toBe(true);
    const on = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ADMIN_TOKEN,
      json: { autoAdmit: { enabled: true, minPerSecond: 1, maxPerSecond: 20, targetClaimP99Ms: 250 } },
    });
    expect(on.status).toBe(200);
    // Three of the sampler's slots (5 s each; this test's gateway runs no timer), fast claims in each.
    gw.deps.stats.sampler.watch(eventId);
    const recorded = async () => {
      const res = await gw.request(`/v1/admin/events/${eventId}/stats/history`, { token: ADMIN_TOKEN });
      return ((await res.json()) as { samples: unknown[] }).samples.length;
    };
    for (let slot = 1; slot <= 3; slot++) {
      await expect
        .poll(
          async () => {
            for (let i = 0; i < 20; i++) gw.deps.stats.claims.record(eventId, 15 + i);
            await gw.deps.stats.sampler.tick();
            return recorded();
          },
          { timeout: 20_000, interval: 250 },
        )
        .toBeGreaterThanOrEqual(slot);
    }

    const op = await newPage({ width: 1280, height: 900 });
    await connect(op.page, eventId);
    await expect
      .poll(() => op.page.locator("#loop-settings").textContent(), PATIENCE)
      .toMatch(/^On: sets admitPerSecond/);
    const loop = op.page.locator("#loop-figure");
    await expect
      .poll(() => loop.locator("title").textContent(), PATIENCE)
      .toMatch(/^Admission loop: rate set [\d.]+\/s, sessions finishing [\d.]+\/s, claim p99 \d+ ms \(target 250 ms\)/);
    expect(await readout(op.page, "loop")).toMatch(/^[\d.]+\/s · (increasing|at_max)$/);
    const ratePoints = await loop.locator("polyline.loop-rate").getAttribute("points");
    expect(ratePoints?.split(" ").length).toBeGreaterThanOrEqual(2);
    expect(await loop.locator("polyline.loop-p99").getAttribute("points")).not.toBe("");
    await screenshot(op.page, "console-7-admission-loop");
    await expectAccessible(op.page, "console-7-admission-loop");
    // While it runs the rate field is the loop's; the operator turns it off, with a confirmation.
    expect(await op.page.locator("#settings-rate").isDisabled()).toBe(true);
    await op.page.getByRole("button", { name: "Turn the loop off…" }).click();
    const dialog = op.page.getByRole("dialog");
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain("Admission loop: on → off");
    await dialog.getByRole("button", { name: "Apply" }).click();
    await op.page.getByText("Applied on every gateway.").waitFor();
    await expect
      .poll(() => op.page.locator("#loop-settings").textContent(), PATIENCE)
      .toMatch(/^Off: the rate is set by hand/);
    expect(await op.page.locator("#settings-rate").isDisabled()).toBe(false);
    const room = await gw.deps.waitingRoom.stats(eventId);
    expect(room.ok && room.settings.autoAdmit.enabled).toBe(false);
    expect(op.errors).toEqual([]);
  });

  it("the operator sets the loop's bounds in the console; a min above the max is named and not sent", {
    timeout: JOURNEY_TIMEOUT_MS,
  }, async ({ expect }) => {
    const eventId = uniqueId();
    const input = eventInput({ waitingRoom: { admitPerSecond: 1, maxActive: 100, sessionSeconds: 600 } });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    const on = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ADMIN_TOKEN,
      json: { autoAdmit: { enabled: true, minPerSecond: 1, maxPerSecond: 20, targetClaimP99Ms: 250 } },
    });
    expect(on.status).toBe(200);
    const loopInForce = async () => {
      const room = await gw.deps.waitingRoom.stats(eventId);
      if (!room.ok) throw new Error("no room");
      return room.settings.autoAdmit;
    };

    const op = await newPage({ width: 1280, height: 900 });
    const patches: unknown[] = [];
    op.page.on("request", (req) => {
      if (req.method() === "PATCH") patches.push(req.postDataJSON());
    });
    await connect(op.page, eventId);
    // Pre-filled from the poll.
    await expect.poll(() => op.page.getByLabel("Max admissions /s").inputValue(), PATIENCE).toBe("20");
    expect(await op.page.getByLabel("Min admissions /s").inputValue()).toBe("1");
    expect(await op.page.getByLabel("Claim p99 target (ms)").inputValue()).toBe("250");

    await op.page.getByLabel("Min admissions /s").fill("2");
    await op.page.getByLabel("Max admissions /s").fill("9");
    await op.page.getByLabel("Claim p99 target (ms)").fill("150");
    // The polls keep coming; what the operator typed stays.
    await new Promise((r) => setTimeout(r, 1_200));
    expect(await op.page.getByLabel("Max admissions /s").inputValue()).toBe("9");
    await op.page.getByRole("button", { name: "Apply bounds…" }).click();
    const dialog = op.page.getByRole("dialog");
    await dialog.waitFor();
    const rows = await dialog.locator("li").allTextContents();
    expect(rows).toEqual(["Min admissions /s: 1 → 2", "Max admissions /s: 20 → 9", "Claim p99 target (ms): 250 → 150"]);
    await screenshot(op.page, "console-8-loop-bounds-confirm");
    await expectAccessible(op.page, "console-8-loop-bounds-confirm");
    await dialog.getByRole("button", { name: "Apply" }).click();
    await op.page.getByText("Applied on every gateway.").waitFor();
    expect(patches).toEqual([{ autoAdmit: { minPerSecond: 2, maxPerSecond: 9, targetClaimP99Ms: 150 } }]);
    expect(await loopInForce()).toEqual({
      enabled: true,
      minPerSecond: 2,
      maxPerSecond: 9,
      targetClaimP99Ms: 150,
      maxThrottlesPerSecond: 0,
    });
    await expect.poll(() => op.page.locator("#loop-settings").textContent(), PATIENCE).toContain("within 2.0–9.0/s");

    // A min above the max: said beside the field, no dialog, nothing sent.
    await op.page.getByLabel("Min admissions /s").fill("10");
    await op.page.getByRole("button", { name: "Apply bounds…" }).click();
    const error = op.page.locator("#bounds-min-error");
    await expect.poll(() => error.textContent(), PATIENCE).toBe("Must not be above the max (9).");
    expect(await op.page.getByLabel("Min admissions /s").getAttribute("aria-invalid")).toBe("true");
    expect(await op.page.locator("#bounds-min:focus").count()).toBe(1);
    await screenshot(op.page, "console-9-loop-bounds-invalid");
    await expectAccessible(op.page, "console-9-loop-bounds-invalid");
    expect(await dialog.isVisible()).toBe(false);
    await new Promise((r) => setTimeout(r, 500));
    expect(patches).toHaveLength(1);
    expect((await loopInForce()).minPerSecond).toBe(2);
    expect(op.errors).toEqual([]);
  });

  it("a wrong operator token is refused with a clear message", async ({ expect }) => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const op = await newPage({ width: 800, height: 700 });
    await op.page.goto(`${server.url}/console?event=${eventId}`);
    await op.page.getByLabel("Operator token").fill("not-the-token");
    await op.page.getByRole("button", { name: "Connect" }).click();
    await op.page.getByText("The operator token was refused.").waitFor();
    await screenshot(op.page, "console-4-token-refused");
    await expectAccessible(op.page, "console-4-token-refused");
    expect(await op.page.locator("#connect").isVisible()).toBe(true);
  });
});
