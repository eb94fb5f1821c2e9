/**
 * The draw's drand beacon checked in the browser (docs/waiting-room.md, "The beacon"): the round
 * the gateway recorded must be the first of the event's chain published at or after the close,
 * its BLS signature must verify under the chain's public key (@noble/curves, bundled into the
 * page), and the beacon the draw took must be drand's randomness, SHA-256 of the signature.
 * A second implementation on purpose, beside src/lottery/drand.ts: the page trusts nothing of the
 * gateway's code. No DOM: it runs under Node too.
 *
 *   bls-unchained-g1-rfc9380 (quicknet): signature on G1, key on G2,
 *     message = SHA-256(round, 8 bytes big-endian), DST BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_
 *   pedersen-bls-chained (default): signature on G2, key on G1,
 *     message = SHA-256(previous signature || round), DST BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_NUL_
 */
import { bls12_381 } from "@noble/curves/bls12-381.js";

export interface DrandChainInfo {
  chainHash: string;
  publicKey: string;
  genesisTime: number;
  period: number;
  scheme: string;
  /** The round the gateway announced for the draw. */
  round: number;
}

export interface DrandRound {
  round: number;
  signature: string;
  previousSignature?: string;
}

export type DrandCheck = { ok: true } | { ok: false; problem: string };

const HEX = /^[0-9a-f]+$/;

function bytesOf(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

function hexOf(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
}

/** The first round published at or after `ms` (Unix ms). */
export function roundAt(chain: { genesisTime: number; period: number }, ms: number): number {
  const elapsed = ms - chain.genesisTime * 1_000;
  return elapsed <= 0 ? 1 : Math.ceil(elapsed / (chain.period * 1_000)) + 1;
}

function roundBytes(round: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(round));
  return out;
}

/**
 * Checks a draw's drand beacon: `beacon` is what the draw key took, `closedAt` when the pre-queue
 * closed (ISO; the announced round stands when the gateway does not say).
 */
export async function checkDrandBeacon(
  chain: DrandChainInfo,
  recorded: DrandRound | undefined,
  beacon: string | undefined,
  closedAt: string | undefined,
): Promise<DrandCheck> {
  if (!recorded) return { ok: false, problem: "no drand round is published for the draw" };
  const closed = Date.parse(closedAt ?? "");
  const due = Number.isFinite(closed) ? roundAt(chain, closed) : chain.round;
  if (recorded.round !== due)
    return { ok: false, problem: `round ${recorded.round} is not ${due}, the first at or after the close` };
  const g1 = chain.scheme === "bls-unchained-g1-rfc9380";
  if (!g1 && chain.scheme !== "pedersen-bls-chained") return { ok: false, problem: `unknown scheme ${chain.scheme}` };
  const sigLength = g1 ? 96 : 192;
  if (recorded.signature.length !== sigLength || !HEX.test(recorded.signature) || !HEX.test(chain.publicKey))
    return { ok: false, problem: "the signature is not hex of the scheme's length" };
  const sig = bytesOf(recorded.signature);
  const roundPart = roundBytes(recorded.round);
  let message: Uint8Array;
  if (g1) {
    message = await sha256(roundPart);
  } else {
    const previous = recorded.previousSignature ?? "";
    if (previous.length !== 192 || !HEX.test(previous))
      return { ok: false, problem: "a chained round needs its previous signature" };
    const both = new Uint8Array(96 + 8);
    both.set(bytesOf(previous));
    both.set(roundPart, 96);
    message = await sha256(both);
  }
  let valid = false;
  try {
    if (g1) {
      const s = bls12_381.shortSignatures;
      const point = s.Signature.fromBytes(sig);
      if (hexOf(point.toBytes(true)) !== recorded.signature) return { ok: false, problem: "a non-canonical signature" };
      valid = s.verify(point, s.hash(message, "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"), bytesOf(chain.publicKey));
    } else {
      const s = bls12_381.longSignatures;
      const point = s.Signature.fromBytes(sig);
      if (hexOf(point.toBytes(true)) !== recorded.signature) return { ok: false, problem: "a non-canonical signature" };
      valid = s.verify(point, s.hash(message, "BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_NUL_"), bytesOf(chain.publicKey));
    }
  } catch (err) {
    return {
      ok: false,
      problem: `the signature or key does not decode (${err instanceof Error ? err.message : String(err)})`,
    };
  }
  if (!valid) return { ok: false, problem: "the signature does not verify under the chain's public key" };
  const randomness = hexOf(await sha256(sig));
  if (randomness !== beacon)
    return { ok: false, problem: "the beacon the draw took is not SHA-256 of the round's signature" };
  return { ok: true };
}
