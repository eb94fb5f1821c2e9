/**
 * Verifies an event's draw from what a gateway publishes, as any outsider can: the queue info's
 * `lottery` (commitment, revealed seed, membership hash, beacon, size) and the membership pages
 * (`GET /v1/events/{id}/queue/lottery`). Used by `npm run verify-lottery` (scripts/verify-lottery.ts).
 *
 * Two things are not taken from the gateway's word (issue 29 item 1): the commitment, when the
 * caller has the one recorded when the fan joined (the seed must hash to that one: a seed and
 * commitment rewritten since both still agree with each other), and the beacon, whose drand round
 * must be the first published at or after the close and whose BLS signature must verify under the
 * chain's public key, with B = SHA-256(signature).
 */
import type { WaitingRoomInfo } from "../waiting-room/types.js";
import { type DrawCheck, verifyDraw } from "./draw.js";
import { type DrandChain, knownChainName, roundAt, verifyBeacon } from "./drand.js";

/** The drand beacon's check: the round's signature, its randomness, and that it is the close's round. */
export interface BeaconCheck {
  ok: boolean;
  round?: number;
  /** The League of Entropy chain the parameters are, or undefined for another chain. */
  knownAs?: string;
  chainHash: string;
  problem?: string;
}

/** Checks the published beacon of a draw whose event names a drand chain. */
export function checkBeacon(lottery: Lottery): BeaconCheck | undefined {
  const drand = lottery.drand;
  if (!drand) return undefined;
  const { round: announced, roundAt: _at, knownAs: _k, ...params } = drand;
  const chain = params as DrandChain;
  const known = knownChainName(chain);
  const base = { chainHash: chain.chainHash, ...(known ? { knownAs: known } : {}) };
  const recorded = lottery.beaconRound;
  if (!recorded) return { ...base, ok: false, problem: "no drand round is published for the draw" };
  const out = { ...base, round: recorded.round };
  const verified = verifyBeacon(chain, recorded);
  if (!verified.ok) return { ...out, ok: false, problem: `the round's signature: ${verified.message}` };
  if (verified.randomness !== lottery.beacon)
    return { ...out, ok: false, problem: "the beacon the draw took is not SHA-256 of the round's signature" };
  const closedAt = Date.parse(lottery.closedAt ?? "");
  const due = Number.isFinite(closedAt) ? roundAt(chain, closedAt) : announced;
  if (recorded.round !== due)
    return { ...out, ok: false, problem: `round ${recorded.round} is not ${due}, the first at or after the close` };
  return { ...out, ok: true };
}

export interface RemoteCheck extends DrawCheck {
  eventId: string;
  commitment: string;
  /** The commitment recorded when the fan joined, when given: the seed was checked against it. */
  recordedCommitment?: string;
  /** The gateway serves the commitment that was recorded (true when none was given). */
  commitmentAsRecorded: boolean;
  /** The drand beacon's check, for an event that names a chain. */
  beaconCheck?: BeaconCheck;
  seed: string;
  membershipHash: string;
  beacon: string;
  size: number;
  sealedOnly?: boolean;
}

/** The queue info's `lottery`, as the gateway publishes it. */
type Lottery = WaitingRoomInfo["lottery"];

async function getJson(url: string): Promise<unknown> {
  const res = await fetch(url);
  const body = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
  if (!res.ok) throw new Error(`${url}: ${res.status} ${body.error?.code ?? ""} ${body.error?.message ?? ""}`.trim());
  return body;
}

export async function verifyRemoteDraw(
  gateway: string,
  eventId: string,
  options: { commitment?: string | undefined } = {},
): Promise<RemoteCheck> {
  const base = `${gateway.replace(/\/+$/, "")}/v1/events/${encodeURIComponent(eventId)}`;
  const info = (await getJson(`${base}/waiting-room`)) as { lottery: Lottery };
  const lottery = info.lottery;
  if (!lottery.seed || !lottery.membershipHash) throw new Error(`${eventId}: the pre-queue has not been drawn yet`);
  const entries: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = (await getJson(
      `${base}/queue/lottery${cursor === undefined ? "" : `?cursor=${encodeURIComponent(cursor)}`}`,
    )) as { entries: string[]; next?: string };
    entries.push(...page.entries);
    if (page.next === undefined || page.entries.length === 0) break;
    cursor = page.next;
  }
  const recorded = options.commitment?.toLowerCase();
  const check = verifyDraw({
    commitment: recorded ?? lottery.commitment,
    seed: lottery.seed,
    membershipHash: lottery.membershipHash,
    beacon: lottery.beacon,
    size: lottery.size ?? -1,
    entries,
  });
  const asRecorded = recorded === undefined || recorded === lottery.commitment.toLowerCase();
  const beaconCheck = checkBeacon(lottery);
  return {
    ...check,
    pass: check.pass && asRecorded && (beaconCheck?.ok ?? true),
    commitmentAsRecorded: asRecorded,
    ...(recorded === undefined ? {} : { recordedCommitment: recorded }),
    ...(beaconCheck ? { beaconCheck } : {}),
    eventId,
    commitment: lottery.commitment,
    seed: lottery.seed,
    membershipHash: lottery.membershipHash,
    beacon: lottery.beacon ?? "",
    size: lottery.size ?? -1,
    ...(lottery.sealedOnly ? { sealedOnly: true } : {}),
  };
}
