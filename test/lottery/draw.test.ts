/**
 * The draw's recipe (src/lottery/draw.ts): an honest draw verifies; a pre-queue tampered with
 * after the close (a fan added, removed, replaced, or two swapped) fails; the order is uniform;
 * and an independent implementation on WebCrypto (what a browser has) agrees with it.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { drawKey, drawOrder, entryOf, membershipHash, type PublishedDraw, verifyDraw } from "../../src/lottery/draw.js";
import { commitmentOf, generateSeed } from "../../src/waiting-room/lottery.js";

/** Upper 1e-6 quantile of chi-square with 23 degrees of freedom. */
const CHI2_23_P1E6 = 70.55;

/** An honest draw of `n` fans: what the gateway would publish. */
function honestDraw(n: number, beacon?: string): PublishedDraw & { fanIds: string[] } {
  const fanIds = Array.from({ length: n }, (_, i) => `fan-${i}-${randomBytes(4).toString("hex")}`);
  const seed = generateSeed();
  const entries = fanIds.map(entryOf);
  const m = membershipHash(entries);
  return {
    fanIds,
    commitment: commitmentOf(seed),
    seed,
    membershipHash: m,
    ...(beacon === undefined ? {} : { beacon }),
    size: n,
    entries: drawOrder(drawKey(seed, m, beacon ?? ""), entries),
  };
}

// An independent implementation, on WebCrypto only: the recipe as the docs state it.
const subtle = globalThis.crypto.subtle;
async function hex(s: string): Promise<string> {
  const d = new Uint8Array(await subtle.digest("SHA-256", new TextEncoder().encode(s)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}
async function webOrder(seed: string, fanIds: string[], beacon: string): Promise<string[]> {
  const entries = [...new Set(await Promise.all(fanIds.map(hex)))];
  const m = await hex(
    [...entries]
      .sort()
      .map((e) => `${e}\n`)
      .join(""),
  );
  const k = await hex(`${seed}:${m}:${beacon}`);
  const ranked = await Promise.all(entries.map(async (e) => ({ e, r: await hex(`${k}:${e}`) })));
  ranked.sort((a, b) => (a.r < b.r ? -1 : a.r > b.r ? 1 : 0));
  return ranked.map((x) => x.e);
}

describe("the draw's recipe", () => {
  it("an honest draw passes every check", () => {
    const d = honestDraw(2_000, "drand-round-4242:0123abcd");
    const check = verifyDraw(d);
    expect(check.checks).toEqual({
      commitment: true,
      entriesWellFormed: true,
      size: true,
      membershipHash: true,
      order: true,
    });
    expect(check.pass).toBe(true);
    expect(check.first).toEqual(d.entries.slice(0, 10));
  });

  it("agrees with an independent WebCrypto implementation, UTF-8 fan ids included", async () => {
    const fanIds = ["fanné", "🎟️ front row", "ファン", ...Array.from({ length: 300 }, (_, i) => `f${i}`)];
    const seed = generateSeed();
    const entries = fanIds.map(entryOf);
    const node = drawOrder(drawKey(seed, membershipHash(entries), "beacon"), entries);
    expect(await webOrder(seed, fanIds, "beacon")).toEqual(node);
  });

  it("a pre-queue tampered with after the close fails", () => {
    const d = honestDraw(500);
    const intruder = entryOf("inserted-after-close");
    const tampered: Record<string, PublishedDraw> = {
      // a fan added after the close, put first
      added: { ...d, entries: [intruder, ...d.entries] },
      // the same, with the size adjusted to match
      addedSized: { ...d, size: d.size + 1, entries: [intruder, ...d.entries] },
      // a fan added, and the order recomputed honestly around it: M no longer matches
      addedReordered: {
        ...d,
        size: d.size + 1,
        entries: drawOrder(drawKey(d.seed, d.membershipHash), [...d.entries, intruder]),
      },
      // a fan removed
      removed: { ...d, size: d.size - 1, entries: d.entries.slice(1) },
      // a fan replaced by another at the same place
      replaced: { ...d, entries: [intruder, ...d.entries.slice(1)] },
      // two fans swapped
      swapped: { ...d, entries: [d.entries[7]!, ...d.entries.slice(1, 7), d.entries[0]!, ...d.entries.slice(8)] },
      // another seed revealed than the one committed
      otherSeed: { ...d, seed: generateSeed() },
      // another beacon than the one recorded
      otherBeacon: { ...d, beacon: "not-the-recorded-one" },
    };
    for (const [name, t] of Object.entries(tampered)) {
      expect({ name, pass: verifyDraw(t).pass }).toEqual({ name, pass: false });
    }
    expect(verifyDraw(tampered.swapped!).firstMismatch).toBe(1);
    expect(verifyDraw(tampered.removed!).checks.membershipHash).toBe(false);
    expect(verifyDraw(tampered.otherSeed!).checks.commitment).toBe(false);
  });

  it("the membership hash is the set's: arrival order does not matter, one fan more does", () => {
    const entries = Array.from({ length: 50 }, (_, i) => entryOf(`m${i}`));
    expect(membershipHash([...entries].reverse())).toBe(membershipHash(entries));
    expect(membershipHash([...entries, entries[0]!])).toBe(membershipHash(entries));
    expect(membershipHash([...entries, entryOf("one-more")])).not.toBe(membershipHash(entries));
  });

  it("the beacon and the membership each change the order", () => {
    const seed = generateSeed();
    const entries = Array.from({ length: 50 }, (_, i) => entryOf(`b${i}`));
    const m = membershipHash(entries);
    const base = drawOrder(drawKey(seed, m), entries);
    expect(drawOrder(drawKey(seed, m, "round-1"), entries)).not.toEqual(base);
    const more = [...entries, entryOf("late")];
    const withOneMore = drawOrder(drawKey(seed, membershipHash(more)), more).filter((e) => e !== entryOf("late"));
    expect(withOneMore).not.toEqual(base);
  });

  it("is uniform: 4,800 draws of four fans over the 24 orders pass a chi-square test (p > 1e-6)", () => {
    const entries = ["a", "b", "c", "d"].map(entryOf);
    const name = new Map(entries.map((e, i) => [e, "abcd"[i]!]));
    const counts = new Map<string, number>();
    const trials = 4_800;
    for (let t = 0; t < trials; t++) {
      const order = drawOrder(drawKey(generateSeed(), membershipHash(entries)), entries)
        .map((e) => name.get(e))
        .join("");
      counts.set(order, (counts.get(order) ?? 0) + 1);
    }
    expect(counts.size).toBe(24);
    const expected = trials / 24;
    const chi2 = [...counts.values()].reduce((s, c) => s + (c - expected) ** 2 / expected, 0);
    console.log(`draw: chi-square ${chi2.toFixed(2)} over 24 orders (critical ${CHI2_23_P1E6} at p = 1e-6)`);
    expect(chi2).toBeLessThan(CHI2_23_P1E6);
  });
});
