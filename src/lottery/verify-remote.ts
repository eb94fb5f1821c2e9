/**
 * Verifies an event's draw from what a gateway publishes, as any outsider can: the queue info's
 * `lottery` (commitment, revealed seed, membership hash, beacon, size) and the membership pages
 * (`GET /v1/events/{id}/queue/lottery`). Used by `npm run verify-lottery` (scripts/verify-lottery.ts).
 */
import type { WaitingRoomInfo } from "../waiting-room/types.js";
import { type DrawCheck, verifyDraw } from "./draw.js";

export interface RemoteCheck extends DrawCheck {
  eventId: string;
  commitment: string;
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

export async function verifyRemoteDraw(gateway: string, eventId: string): Promise<RemoteCheck> {
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
  const check = verifyDraw({
    commitment: lottery.commitment,
    seed: lottery.seed,
    membershipHash: lottery.membershipHash,
    beacon: lottery.beacon,
    size: lottery.size ?? -1,
    entries,
  });
  return {
    ...check,
    eventId,
    commitment: lottery.commitment,
    seed: lottery.seed,
    membershipHash: lottery.membershipHash,
    beacon: lottery.beacon ?? "",
    size: lottery.size ?? -1,
    ...(lottery.sealedOnly ? { sealedOnly: true } : {}),
  };
}
