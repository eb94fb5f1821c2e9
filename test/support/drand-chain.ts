/**
 * A drand chain made in the test: a random BLS secret key whose public key the event names, and
 * the rounds it signs, exactly as a League of Entropy relay serves them (nothing is fetched).
 */
import { createHash, randomBytes } from "node:crypto";
import { bls12_381 } from "@noble/curves/bls12-381.js";
import type { DrandBeacon, DrandChain, DrandScheme } from "../../src/lottery/drand.js";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const roundBytes = (round: number) => {
  const out = Buffer.alloc(8);
  out.writeBigUInt64BE(BigInt(round));
  return out;
};

export interface TestChain {
  chain: DrandChain;
  /** The round's beacon as a relay serves it ({round, signature} and, chained, previousSignature). */
  sign(round: number): DrandBeacon;
}

export function testChain(opts: { scheme?: DrandScheme; genesisTime?: number; period?: number } = {}): TestChain {
  const scheme = opts.scheme ?? "bls-unchained-g1-rfc9380";
  const g1 = scheme === "bls-unchained-g1-rfc9380";
  const dst = g1 ? "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_" : "BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_NUL_";
  const seed = randomBytes(48);
  const { secretKey, publicKey } = g1 ? bls12_381.shortSignatures.keygen(seed) : bls12_381.longSignatures.keygen(seed);
  const signHashed = (message: Uint8Array): Uint8Array =>
    g1
      ? bls12_381.shortSignatures.sign(bls12_381.shortSignatures.hash(message, dst), secretKey).toBytes(true)
      : bls12_381.longSignatures.sign(bls12_381.longSignatures.hash(message, dst), secretKey).toBytes(true);
  const chain: DrandChain = {
    chainHash: randomBytes(32).toString("hex"),
    publicKey: hex(publicKey.toBytes(true)),
    genesisTime: opts.genesisTime ?? Math.floor(Date.now() / 1_000) - 3_600,
    period: opts.period ?? 3,
    scheme,
  };
  const signed = new Map<number, string>();
  // A chained test chain starts at the first round a test asks for (its previous signature is
  // zeros): signing from round 1 would take a signature per period since genesis.
  let anchor = 0;
  const previousOf = (round: number) => (round - 1 < anchor ? "00".repeat(96) : signatureOf(round - 1));
  const signatureOf = (round: number): string => {
    const hit = signed.get(round);
    if (hit) return hit;
    const message = g1
      ? createHash("sha256").update(roundBytes(round)).digest()
      : createHash("sha256")
          .update(Buffer.from(previousOf(round), "hex"))
          .update(roundBytes(round))
          .digest();
    const sig = hex(signHashed(Uint8Array.from(message)));
    signed.set(round, sig);
    return sig;
  };
  return {
    chain,
    sign(round) {
      if (g1) return { round, signature: signatureOf(round) };
      if (anchor === 0) anchor = round;
      return { round, signature: signatureOf(round), previousSignature: previousOf(round) };
    },
  };
}
