/**
 * Headless Chromium for the page tests: Debian's chromium driven by playwright-core (no browser
 * download). A missing chromium fails the suite with the command that installs it; it never skips.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { type Browser, type BrowserContext, type BrowserContextOptions, chromium, type Page } from "playwright-core";

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const ARTIFACTS = join(process.cwd(), "test-artifacts");

// Running as root in a container: no sandbox; nothing phoning home. playwright-core gives every
// launch a fresh temporary profile (--user-data-dir) of its own.
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `No Chromium at ${CHROMIUM_PATH}: the browser tests drive Debian's chromium. ` +
        "Install it with `apt-get install -y chromium` (or point CHROMIUM_PATH at a Chromium binary).",
    );
  }
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 });
}

/**
 * How long a page action and a navigation may take. The parallel suite runs two test files at once
 * on two cores beside Chromium, Redis and dynalite; a page load there has taken over 15 s (a CI
 * run on Node 20), so navigations get a minute.
 */
export const PAGE_TIMEOUT_MS = 30_000;
export const NAVIGATION_TIMEOUT_MS = 60_000;

/**
 * How long one long browser journey (a test with many pages, actions and accessibility scans) may
 * take. Alone such a test takes 15-30 s; in the parallel suite, beside two other files and this
 * file's other journeys (describe.concurrent), a CI run on f09c2f2 took over 90 s for the
 * console's longest and 60 s for one of 16 s. Each step keeps its own bound (PAGE_TIMEOUT_MS,
 * expect.poll's timeout), so a stuck step still fails on that step.
 */
export const JOURNEY_TIMEOUT_MS = 180_000;

/** Gives a page the suite's patience for actions and navigations. */
export function patient(page: Page): Page {
  page.setDefaultTimeout(PAGE_TIMEOUT_MS);
  page.setDefaultNavigationTimeout(NAVIGATION_TIMEOUT_MS);
  return page;
}

export interface TestBrowser {
  /** The launched browser; throws the launch's error when it failed. */
  get(): Browser;
  /** A page in a context of its own (its own storage), with the suite's timeouts and its errors collected. */
  newPage(options?: BrowserContextOptions): Promise<{ page: Page; errors: string[] }>;
  /** Closes every context newPage opened, then the browser. */
  close(): Promise<void>;
}

/**
 * Launches Chromium once for a test file. A launch failure is kept and thrown by every test that
 * asks for the browser, so each of them fails (a throwing beforeAll would only mark them skipped).
 */
export async function sharedChromium(): Promise<TestBrowser> {
  const launched = await launchChromium().catch((err: unknown) =>
    err instanceof Error ? err : new Error(String(err)),
  );
  const contexts: BrowserContext[] = [];
  const get = () => {
    if (launched instanceof Error) throw launched;
    return launched;
  };
  return {
    get,
    async newPage(options = {}) {
      const context = await get().newContext({ viewport: { width: 1100, height: 900 }, ...options });
      contexts.push(context);
      const page = patient(await context.newPage());
      return { page, errors: watchErrors(page) };
    },
    close: async () => {
      for (const context of contexts.splice(0)) await context.close().catch(() => {});
      if (!(launched instanceof Error)) await launched.close();
    },
  };
}

/** Builds waiting-room/dist when it is missing or older than its sources (npm test builds it first). */
export function ensurePagesBuilt(): void {
  const root = join(process.cwd(), "waiting-room");
  const built = join(root, "dist", "index.html");
  const newest = Math.max(
    statSync(join(root, "build.mjs")).mtimeMs,
    ...readdirSync(join(root, "src")).map((f) => statSync(join(root, "src", f)).mtimeMs),
  );
  if (existsSync(built) && statSync(built).mtimeMs >= newest) return;
  const run = spawnSync(process.execPath, [join(root, "build.mjs")], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`the page build failed:\n${run.stderr}`);
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * Collects uncaught exceptions and console errors, so a test can assert none happened. The API's
 * expected 4xx answers (a lost race is a 409, a declined card a 402) are not errors of the page.
 */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(`pageerror: ${err.message}`));
  page.on("console", (msg) => {
    if (msg.type() !== "error") return;
    if (/^Failed to load resource: the server responded with a status of 4\d\d\b/.test(msg.text())) return;
    errors.push(`console: ${msg.text()}`);
  });
  return errors;
}

/**
 * The fan id the fan page keeps for an event on this device (waiting-room/src/storage.ts), set as
 * a returning visitor's would be: the page joins with it, so a test can name its fan to the gateway.
 */
export async function keepFanId(page: Page, eventId: string, fanId: string): Promise<void> {
  await page.evaluate(`localStorage.setItem(${JSON.stringify(`onsale.fanId.${eventId}`)}, ${JSON.stringify(fanId)})`);
}

/** The fan id the fan page keeps for an event, or null. */
export async function keptFanId(page: Page, eventId: string): Promise<string | null> {
  return (await page.evaluate(`localStorage.getItem(${JSON.stringify(`onsale.fanId.${eventId}`)})`)) as string | null;
}
