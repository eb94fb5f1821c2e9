/**
 * The drand beacon check (src/lottery/drand.ts): real League of Entropy rounds verify with the
 * chains' published keys and give drand's randomness; a test chain's rounds verify; every other
 * round, signature, key or encoding is refused; the round of a close is the first published at or
 * after it. No I/O.
 */
import { describe, expect, it } from "vitest";
import {
  drandChainSchema,
  KNOWN_CHAINS,
  knownChainName,
  randomnessOf,
  roundAt,
  roundTimeMs,
  verifyBeacon,
} from "../../src/lottery/drand.js";
import { testChain } from "../support/drand-chain.js";

const quicknet = KNOWN_CHAINS.find((c) => c.scheme === "bls-unchained-g1-rfc9380")!;
const mainnet = KNOWN_CHAINS.find((c) => c.scheme === "pedersen-bls-chained")!;
const { name: _q, ...quicknetChain } = quicknet;
const { name: _m, ...mainnetChain } = mainnet;

// Published rounds (https://api.drand.sh/<chain>/public/<round>).
const QUICKNET_657413 = {
  round: 657_413,
  signature: "b713718a38ae728dfd477991af2822e08d2f305e47718cef9f7848ce4050e7be41076862b98fad56e91a6b85b89cd97b",
  randomness: "fc1873a13f3545aeade8401532ef5519920652eee6b0d2b19ca12643b87b3587",
};
const MAINNET_3311596 = {
  round: 3_311_596,
  previousSignature:
    "8ed588f2a7716fb1349e2d9803da5db0005e98a83783c353d4a08f183236a9ad91d70ddb01266f4b7c576983db464b430e65680b9e0098552758afd6c1e6afcb77e3f62fe1b93d42d1cb63abbb2205512fe12fbf74ea9c5ac3b8f5c1e283a1d8",
  signature:
    "a696b9409ababce45749c3a4ec369074453dd4a79967734e1390d969c8ad8d98897d217b9121e92c8ddebbddda8d92f900e3bd6bf9deb166863b1a19390d743f82774001487594c5c09e581db7365f02b70a2c8cc41ce32446ef08e4890c4754",
  randomness: "647c07b2abbf7ff2afb4d670214f565e5cd9f9c91bfdcecb59a21f3c78d73920",
};

describe("drand rounds", () => {
  it("verifies real quicknet and default-chain rounds and gives drand's randomness", () => {
    const { randomness: q, ...qBeacon } = QUICKNET_657413;
    expect(verifyBeacon(quicknetChain, qBeacon)).toEqual({ ok: true, randomness: q });
    const { randomness: m, ...mBeacon } = MAINNET_3311596;
    expect(verifyBeacon(mainnetChain, mBeacon)).toEqual({ ok: true, randomness: m });
    expect(knownChainName(quicknetChain)).toContain("quicknet");
    expect(drandChainSchema.safeParse(quicknetChain).success).toBe(true);
    expect(drandChainSchema.safeParse(mainnetChain).success).toBe(true);
  });

  it("refuses another round, another key, another signature, a non-canonical encoding", () => {
    const { randomness: _r, ...beacon } = QUICKNET_657413;
    expect(verifyBeacon(quicknetChain, { ...beacon, round: beacon.round + 1 })).toMatchObject({
      ok: false,
      reason: "bad_signature",
    });
    const other = testChain();
    expect(verifyBeacon(other.chain, beacon)).toMatchObject({ ok: false, reason: "bad_signature" });
    // Another valid signature of the test chain, presented as quicknet's.
    expect(verifyBeacon(quicknetChain, other.sign(beacon.round))).toMatchObject({ ok: false });
    for (const signature of [
      "",
      "zz".repeat(48),
      beacon.signature.toUpperCase(),
      beacon.signature.slice(2),
      "00".repeat(48),
    ])
      expect(verifyBeacon(quicknetChain, { ...beacon, signature }).ok).toBe(false);
    // A chained round needs its previous signature, an unchained one takes none.
    const { randomness: _m, previousSignature, ...chained } = MAINNET_3311596;
    expect(verifyBeacon(mainnetChain, chained)).toMatchObject({ ok: false, reason: "malformed" });
    expect(
      verifyBeacon(mainnetChain, { ...chained, previousSignature: previousSignature.replace(/^8e/, "8f") }),
    ).toMatchObject({ ok: false, reason: "bad_signature" });
    expect(verifyBeacon(quicknetChain, { ...beacon, previousSignature })).toMatchObject({ ok: false });
    for (const round of [0, -1, 1.5, Number.NaN])
      expect(verifyBeacon(quicknetChain, { ...beacon, round }).ok).toBe(false);
  });

  it("verifies the rounds of a chain made in the test, both schemes", () => {
    for (const scheme of ["bls-unchained-g1-rfc9380", "pedersen-bls-chained"] as const) {
      const t = testChain({ scheme });
      expect(drandChainSchema.safeParse(t.chain).success).toBe(true);
      const b = t.sign(1_000);
      expect(verifyBeacon(t.chain, b)).toEqual({ ok: true, randomness: randomnessOf(b.signature) });
      expect(verifyBeacon(t.chain, { ...t.sign(1_001), round: 1_000 }).ok).toBe(false);
    }
  });

  it("the draw's round is the first published at or after the close", () => {
    const chain = { genesisTime: 1_000, period: 3 };
    expect(roundTimeMs(chain, 1)).toBe(1_000_000);
    expect(roundAt(chain, 999_000)).toBe(1);
    expect(roundAt(chain, 1_000_000)).toBe(1);
    expect(roundAt(chain, 1_000_001)).toBe(2);
    expect(roundAt(chain, 1_003_000)).toBe(2);
    expect(roundAt(chain, 1_003_001)).toBe(3);
    for (const ms of [1_000_000, 1_234_567, 9_999_999]) {
      const r = roundAt(chain, ms);
      expect(roundTimeMs(chain, r)).toBeGreaterThanOrEqual(ms);
      expect(roundTimeMs(chain, r - 1)).toBeLessThan(ms);
    }
  });

  it("a chain config must be well formed, and a League of Entropy hash must come with that chain's key", () => {
    expect(drandChainSchema.safeParse({ ...quicknetChain, publicKey: mainnet.publicKey }).success).toBe(false);
    expect(drandChainSchema.safeParse({ ...quicknetChain, period: 30 }).success).toBe(false);
    expect(drandChainSchema.safeParse({ ...quicknetChain, scheme: "bls-unchained-on-g1" }).success).toBe(false);
    expect(drandChainSchema.safeParse({ ...quicknetChain, publicKey: "ab".repeat(96) }).success).toBe(false);
    const made = testChain().chain;
    expect(drandChainSchema.safeParse({ ...made, chainHash: quicknet.chainHash }).success).toBe(false);
    expect(knownChainName(made)).toBeUndefined();
  });
});
