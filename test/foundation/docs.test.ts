/**
 * The docs and comments say what the code does, where they once contradicted it (issue 29, item
 * 4). The behaviour itself is tested where it lives: the admission loop's steps kept on the event
 * in test/gateway/admission-loop.test.ts, the room restored from them in
 * test/waiting-room/redis-loss.test.ts, the pre-queue's members in the lottery tests.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path, keep));
    else if (keep(name)) out.push(path);
  }
  return out;
}

const docs = () => [...filesUnder("docs", (n) => n.endsWith(".md")), "README.md", "RELIABILITY.md"];

/** The sentences of a text, its line breaks and list markers folded away. */
const sentences = (text: string) =>
  text
    .replace(/\s+/g, " ")
    .split(/(?<=[.:;])\s/)
    .map((s) => s.trim());

describe("the docs agree with the code", () => {
  it("no doc says the admission loop's rates stay out of DynamoDB: every step that moves the rate is kept", () => {
    const saysNotKept = /\bloop\b.*\bnot (?:written|kept|stored|persisted|saved)\b.*\bDynamoDB\b/i;
    const contradictions = docs().flatMap((file) =>
      sentences(readFileSync(file, "utf8"))
        .filter((s) => saysNotKept.test(s))
        .map((s) => `${file}: ${s}`),
    );
    expect(contradictions).toEqual([]);
    // And the doc that explains the loop says it is kept (src/gateway.ts roomKeeper, each change).
    const loop = readFileSync("docs/waiting-room.md", "utf8");
    expect(loop).toMatch(/Every step that\s+changes the rate is also written to DynamoDB/);
  });

  it("no comment or doc describes the old pre-queue member (a hash of the seed and the fan id)", () => {
    const files = [
      ...filesUnder("src", (n) => n.endsWith(".ts")),
      ...filesUnder("lua", (n) => n.endsWith(".lua")),
      ...docs(),
    ];
    const stale = files.filter((file) =>
      /sha1hex|seed\s*(?:\.\.|:)\s*':'?\s*\.\.\s*fanId|seed:fanId/.test(readFileSync(file, "utf8")),
    );
    expect(stale).toEqual([]);
    // What the script does: the member is the plain fan id.
    const prequeue = readFileSync("lua/waiting-room/includes/prequeue.lua", "utf8");
    expect(prequeue).toMatch(/local function pre_member\(r, fanId\)\s+return fanId\s+end/);
  });
});
