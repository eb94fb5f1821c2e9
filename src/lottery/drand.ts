/**
 * The draw's beacon is a drand round (issue 29 item 1): a value published by the League of
 * Entropy after the pre-queue closes, which nobody in the operation can choose or foresee. The
 * gateway takes a round only with its BLS signature, checked here against the chain's public key,
 * and its value is what drand defines as the round's randomness: SHA-256 of the signature bytes.
 *
 * Two schemes (https://drand.love/docs/specification/):
 *  - `bls-unchained-g1-rfc9380` (quicknet, 3 s): signatures on G1 (48 bytes), the public key on G2
 *    (96 bytes); message = SHA-256(round as 8-byte big-endian); DST
 *    `BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_`.
 *  - `pedersen-bls-chained` (the default chain, 30 s): signatures on G2 (96 bytes), the public key
 *    on G1 (48 bytes); message = SHA-256(previous signature || round as 8-byte big-endian); DST
 *    `BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_NUL_`. A round comes with its previous signature.
 *
 * BLS signatures are unique: for a round there is one valid signature, and it is taken only in its
 * canonical compressed encoding, so its randomness is one value too. Nothing here does I/O.
 * Round r is published at genesisTime + (r - 1) * period (seconds).
 */
import { createHash } from "node:crypto";
import { bls12_381 } from "@noble/curves/bls12-381.js";
import { z } from "zod";

export const DRAND_SCHEMES = ["bls-unchained-g1-rfc9380", "pedersen-bls-chained"] as const;
export type DrandScheme = (typeof DRAND_SCHEMES)[number];

const hex = (bytes: number) =>
  z
    .string()
    .length(bytes * 2)
    .regex(/^[0-9a-f]+$/, "lowercase hex");

/** A drand chain as its `/info` names it (https://api.drand.sh/<chainHash>/info). */
export const drandChainSchema = z
  .object({
    chainHash: hex(32),
    /** Compressed: 96 bytes (G2) for quicknet, 48 bytes (G1) for the chained scheme. */
    publicKey: z.string().regex(/^[0-9a-f]+$/, "lowercase hex"),
    /** Unix seconds of round 1. */
    genesisTime: z.number().int().min(1),
    /** Seconds between rounds. */
    period: z.number().int().min(1).max(3_600),
    scheme: z.enum(DRAND_SCHEMES),
  })
  .strict()
  .superRefine((c, ctx) => {
    const want = c.scheme === "bls-unchained-g1-rfc9380" ? 96 : 48;
    if (c.publicKey.length !== want * 2) {
      ctx.addIssue({
        code: "custom",
        path: ["publicKey"],
        message: `${c.scheme}: a ${want}-byte compressed public key (${want * 2} hex characters)`,
      });
      return;
    }
    try {
      publicKeyPoint(c);
    } catch {
      ctx.addIssue({ code: "custom", path: ["publicKey"], message: "not a point of the scheme's group" });
    }
    const known = KNOWN_CHAINS.find((k) => k.chainHash === c.chainHash);
    if (known && JSON.stringify(known) !== JSON.stringify({ ...c, name: known.name })) {
      ctx.addIssue({
        code: "custom",
        path: ["chainHash"],
        message: `the hash of drand ${known.name}, with other parameters than that chain's`,
      });
    }
  });

export type DrandChain = z.infer<typeof drandChainSchema>;

/** The League of Entropy's mainnet chains, so a published chain can be told from a made-up one. */
export const KNOWN_CHAINS: readonly (DrandChain & { name: string })[] = [
  {
    chainHash: "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971",
    publicKey:
      "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a",
    genesisTime: 1_692_803_367,
    period: 3,
    scheme: "bls-unchained-g1-rfc9380",
    name: "quicknet (League of Entropy mainnet)",
  },
  {
    chainHash: "8990e7a9aaed2ffed73dbd7092123d6f289930540d7651336225dc172e51b2ce",
    publicKey: "868f005eb8e6e4ca0a47c8a77ceaa5309a47978a7c71bc5cce96366b5d7a569937c529eeda66c7293784a9402801af31",
    genesisTime: 1_595_431_050,
    period: 30,
    scheme: "pedersen-bls-chained",
    name: "default (League of Entropy mainnet)",
  },
];

/** The League of Entropy chain with this hash and these parameters, or undefined (another chain). */
export function knownChainName(chain: DrandChain): string | undefined {
  const known = KNOWN_CHAINS.find((k) => k.chainHash === chain.chainHash);
  return known && JSON.stringify(known) === JSON.stringify({ ...chain, name: known.name }) ? known.name : undefined;
}

const DST_G1 = "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_";
const DST_G2 = "BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_NUL_";

/** When round `round` is published (Unix ms). */
export function roundTimeMs(chain: Pick<DrandChain, "genesisTime" | "period">, round: number): number {
  return (chain.genesisTime + (round - 1) * chain.period) * 1_000;
}

/**
 * The first round published at or after `ms` (Unix ms): the draw's round for a pre-queue closed at
 * `ms`. Nobody knows its value when the pre-queue closes.
 */
export function roundAt(chain: Pick<DrandChain, "genesisTime" | "period">, ms: number): number {
  const elapsed = ms - chain.genesisTime * 1_000;
  if (elapsed <= 0) return 1;
  return Math.ceil(elapsed / (chain.period * 1_000)) + 1;
}

/** A round as a drand relay serves it (`/public/<round>`); `previousSignature` for the chained scheme. */
export interface DrandBeacon {
  round: number;
  signature: string;
  previousSignature?: string | undefined;
}

export type BeaconCheck =
  | { ok: true; randomness: string }
  | { ok: false; reason: "malformed" | "bad_signature"; message: string };

const bytesOf = (h: string) => Uint8Array.from(Buffer.from(h, "hex"));
const sha256 = (...parts: Uint8Array[]) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return Uint8Array.from(h.digest());
};

function roundBytes(round: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(round));
  return out;
}

function publicKeyPoint(chain: Pick<DrandChain, "publicKey" | "scheme">) {
  const bytes = bytesOf(chain.publicKey);
  return chain.scheme === "bls-unchained-g1-rfc9380"
    ? bls12_381.G2.Point.fromBytes(bytes)
    : bls12_381.G1.Point.fromBytes(bytes);
}

/** The message a round's signature signs, for the chain's scheme. */
export function roundMessage(chain: Pick<DrandChain, "scheme">, beacon: DrandBeacon): Uint8Array {
  if (chain.scheme === "bls-unchained-g1-rfc9380") return sha256(roundBytes(beacon.round));
  return sha256(bytesOf(beacon.previousSignature ?? ""), roundBytes(beacon.round));
}

const HEX = /^[0-9a-f]+$/;

/**
 * Checks a round's BLS signature against the chain's public key and gives the round's randomness
 * (lowercase hex SHA-256 of the signature bytes), the draw's beacon value B.
 */
export function verifyBeacon(chain: DrandChain, beacon: DrandBeacon): BeaconCheck {
  const g1 = chain.scheme === "bls-unchained-g1-rfc9380";
  const sigBytes = g1 ? 48 : 96;
  if (!Number.isSafeInteger(beacon.round) || beacon.round < 1)
    return { ok: false, reason: "malformed", message: "round: a positive integer" };
  if (typeof beacon.signature !== "string" || beacon.signature.length !== sigBytes * 2 || !HEX.test(beacon.signature))
    return {
      ok: false,
      reason: "malformed",
      message: `signature: ${sigBytes} bytes as ${sigBytes * 2} lowercase hex characters`,
    };
  if (!g1) {
    const prev = beacon.previousSignature;
    if (typeof prev !== "string" || prev.length !== 192 || !HEX.test(prev))
      return {
        ok: false,
        reason: "malformed",
        message: "previousSignature: the chained scheme signs the previous round's 96-byte signature",
      };
  } else if (beacon.previousSignature !== undefined) {
    return { ok: false, reason: "malformed", message: "previousSignature: not part of an unchained round" };
  }
  try {
    const sig = bytesOf(beacon.signature);
    const message = roundMessage(chain, beacon);
    let valid: boolean;
    if (g1) {
      const point = bls12_381.shortSignatures.Signature.fromBytes(sig);
      // One encoding per point: the randomness is a hash of these bytes.
      if (Buffer.from(point.toBytes(true)).toString("hex") !== beacon.signature)
        return { ok: false, reason: "malformed", message: "signature: not the canonical compressed encoding" };
      valid = bls12_381.shortSignatures.verify(
        point,
        bls12_381.shortSignatures.hash(message, DST_G1),
        bls12_381.G2.Point.fromBytes(bytesOf(chain.publicKey)),
      );
    } else {
      const point = bls12_381.longSignatures.Signature.fromBytes(sig);
      if (Buffer.from(point.toBytes(true)).toString("hex") !== beacon.signature)
        return { ok: false, reason: "malformed", message: "signature: not the canonical compressed encoding" };
      valid = bls12_381.longSignatures.verify(
        point,
        bls12_381.longSignatures.hash(message, DST_G2),
        bls12_381.G1.Point.fromBytes(bytesOf(chain.publicKey)),
      );
    }
    if (!valid)
      return { ok: false, reason: "bad_signature", message: "the signature is not the chain's for this round" };
  } catch (err) {
    return { ok: false, reason: "malformed", message: `signature: ${(err as Error).message}` };
  }
  return { ok: true, randomness: randomnessOf(beacon.signature) };
}

/** drand's randomness of a round: lowercase hex SHA-256 of its signature bytes. */
export function randomnessOf(signature: string): string {
  return createHash("sha256").update(bytesOf(signature)).digest("hex");
}
