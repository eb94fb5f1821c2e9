/**
 * Fan ids the gateway issues (issue 29 item 2): a place only its fan can use.
 *
 * A fan id chosen by the client is a name anyone can say: a second join under it answers the same
 * queue token (the repeat join is how a fan gets its place back), and the published lottery lists
 * SHA-256 of every fan id, so a guessable id is found from its hash and its place taken. A fan
 * who joins without a fan id is given one instead:
 *
 *     f.<base64url(16 random bytes)>.<base64url(HMAC-SHA256(key, eventId + ":" + random))[0..16]>
 *
 * 128 random bits nobody else learns (the lottery's SHA-256 of it leads nowhere), bound to the
 * event by a MAC keyed by a key derived from the gateway secret (HMAC-SHA256(GATEWAY_SECRET,
 * "onsale-gateway fan id v1")), so every gateway knows an id any other issued, with no state. The
 * id is the fan's credential: it is given once, in the answer, and the fan page keeps it (per
 * event, in the browser's storage) to rejoin after losing its queue token.
 *
 * An event that sets `waitingRoom.fanIds: "issued"` accepts only issued ids: a join naming any
 * other is refused (400, `details.reason: "not_issued"`), so no id can be guessed there. The
 * default, `"any"`, keeps the contract of docs/API.md for callers that name their fans (a
 * ticketing site behind its own login, the load kit): its fan ids are as secret as the caller
 * keeps them.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export const FAN_ID_MODES = ["any", "issued"] as const;
export type FanIdMode = (typeof FAN_ID_MODES)[number];

const PREFIX = "f.";
/** 16 random bytes as base64url: 22 characters. */
const RANDOM_CHARS = 22;
/** 96 bits of the MAC as base64url: 16 characters. */
const MAC_CHARS = 16;
const ISSUED = /^f\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{16})$/;

export interface FanIdIssuer {
  /** A new fan id for this event: unguessable, and known as issued by every gateway. */
  issue(eventId: string): string;
  /** Whether this gateway (or another with the same secret) issued `fanId` for this event. */
  isIssued(eventId: string, fanId: string): boolean;
}

export function createFanIdIssuer(gatewaySecret: string): FanIdIssuer {
  const key = createHmac("sha256", gatewaySecret).update("onsale-gateway fan id v1").digest();
  const macOf = (eventId: string, random: string) =>
    createHmac("sha256", key).update(`${eventId}:${random}`).digest("base64url").slice(0, MAC_CHARS);
  return {
    issue(eventId) {
      const random = randomBytes(16).toString("base64url");
      return `${PREFIX}${random}.${macOf(eventId, random)}`;
    },
    isIssued(eventId, fanId) {
      const m = ISSUED.exec(fanId);
      if (!m || m[1]!.length !== RANDOM_CHARS) return false;
      const want = Buffer.from(macOf(eventId, m[1]!));
      const got = Buffer.from(m[2]!);
      return want.length === got.length && timingSafeEqual(want, got);
    },
  };
}
