/**
 * Fetching the draw's drand round from relays (`GET <relay>/<chainHash>/public/<round>`, as
 * api.drand.sh and drand.cloudflare.com serve it), so a gateway configured with DRAND_RELAYS takes
 * the round by itself once it is published: nobody has to record it, so nobody can withhold it.
 * What a relay answers is only a candidate: taken from the first relay whose round verifies under
 * the event's chain (and checked again when recorded, src/waiting-room/beacon.ts), so a lying relay
 * can delay the draw (until another relay or the operator answers) but never choose it.
 */
import { type DrandBeacon, type DrandChain, roundTimeMs, verifyBeacon } from "./drand.js";

/** A round of a chain, or null when no relay has it (yet). */
export type RoundSource = (chain: DrandChain, round: number) => Promise<DrandBeacon | null>;

export function drandRelays(
  urls: readonly string[],
  options: { timeoutMs?: number; fetch?: typeof fetch; now?: () => number } = {},
): RoundSource {
  const timeoutMs = options.timeoutMs ?? 3_000;
  const get = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  return async (chain, round) => {
    // Not published before its time: no request for a round nobody can have.
    if (roundTimeMs(chain, round) > now()) return null;
    for (const url of urls) {
      try {
        const res = await get(`${url.replace(/\/+$/, "")}/${chain.chainHash}/public/${round}`, {
          signal: AbortSignal.timeout(timeoutMs),
        });
        if (!res.ok) continue;
        const body = (await res.json()) as { round?: unknown; signature?: unknown; previous_signature?: unknown };
        if (body.round !== round || typeof body.signature !== "string") continue;
        const candidate: DrandBeacon = {
          round,
          signature: body.signature,
          ...(chain.scheme === "pedersen-bls-chained" && typeof body.previous_signature === "string"
            ? { previousSignature: body.previous_signature }
            : {}),
        };
        // A relay that answers something else (another chain's, a forgery) is passed over.
        if (verifyBeacon(chain, candidate).ok) return candidate;
      } catch {
        // The next relay.
      }
    }
    return null;
  };
}
