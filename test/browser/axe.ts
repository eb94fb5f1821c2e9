/**
 * axe-core (the accessibility engine, a devDependency) run in a page as the browser tests see it.
 * Every page the gateway serves is checked in the states its tests bring it to, and must have no
 * violation of axe's rules as it runs them by default (WCAG 2.0-2.2 A and AA, and its best
 * practices; not the experimental rules, nor the AAA ones). A violation fails the test
 * with the rule, its help text and the elements (their selector and axe's summary), so the fix is
 * in the message.
 *
 * The engine is evaluated in the page (Runtime.evaluate through playwright), which the pages'
 * Content-Security-Policy (`script-src 'self'`) does not govern, as it would an injected <script>.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

const require = createRequire(import.meta.url);
let engine: string | undefined;
const axeSource = () => {
  engine ??= readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
  return engine;
};

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string; summary: string }>;
}

/** The violations axe finds in the page as it is now (an empty list when there are none). */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  // These functions run in the page (the test's tsconfig has no DOM types: globalThis is the window).
  const loaded = await page.evaluate(() => typeof (globalThis as { axe?: unknown }).axe === "object");
  if (!loaded) await page.evaluate(axeSource());
  return page.evaluate(async () => {
    type Result = {
      violations: Array<{
        id: string;
        impact: string | null;
        help: string;
        nodes: Array<{ target: unknown[]; failureSummary?: string }>;
      }>;
    };
    const page = globalThis as unknown as {
      axe: { run(ctx: unknown, opts: unknown): Promise<Result> };
      document: unknown;
    };
    const result = await page.axe.run(page.document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.map(String).join(" "), summary: n.failureSummary ?? "" })),
    }));
  });
}

/** One line per violated rule, with its elements: what a failed test prints. */
export function describeViolations(violations: readonly AxeViolation[]): string {
  return violations
    .map(
      (v) =>
        `${v.id} (${v.impact ?? "?"}): ${v.help}\n` +
        v.nodes.map((n) => `  ${n.target}: ${n.summary.replaceAll("\n", " ")}`).join("\n"),
    )
    .join("\n");
}

/** Fails, naming every violation, unless axe finds none in the page as it is now. `where` names the state. */
export async function expectAccessible(page: Page, where: string): Promise<void> {
  const violations = await axeViolations(page);
  if (violations.length > 0) {
    throw new Error(`axe found ${violations.length} violated rule(s) on ${where}:\n${describeViolations(violations)}`);
  }
}
