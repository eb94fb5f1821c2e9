/**
 * A fan's place as the gateway shows it: the fan view a line script answered, the advice derived
 * from it, and for an admitted fan the access token of the session.
 */
import { adviseFan } from "./advice.js";
import { type Fields, FAN_STATUSES, iso } from "./replies.js";
import type { TokenService } from "./tokens.js";
import type { FanPlace } from "./types.js";

/** Signed access tokens kept for polls of the same session; the oldest go first past this many. */
const ACCESS_TOKENS_KEPT = 20_000;

/** `drawGraceMs`: the room's draw waits this long after the close (advice.ts DRAW_GRACE_MS). */
export type PlaceReader = (f: Fields, eventId: string, fanId: string, room?: { drawGraceMs?: number }) => FanPlace;

export function createPlaceReader(tokens: TokenService): PlaceReader {
  // An admitted fan polls with the same session until it ends, and the access token's claims are a
  // pure function of the session (iat = admission, exp = session expiry): signed once per session
  // here, not once per poll (and so the same on every poll to this process with ES256 too, whose
  // signatures carry a random nonce).
  const accessTokens = new Map<string, string>();
  function accessTokenFor(input: Parameters<TokenService["signAccessToken"]>[0]): string {
    const key = [
      input.eventId,
      input.sessionId,
      input.fanId,
      input.epoch ?? "",
      input.issuedAt.getTime(),
      input.expiresAt.getTime(),
    ].join("\n");
    const kept = accessTokens.get(key);
    if (kept !== undefined) return kept;
    const token = tokens.signAccessToken(input);
    if (accessTokens.size >= ACCESS_TOKENS_KEPT) accessTokens.delete(accessTokens.keys().next().value as string);
    accessTokens.set(key, token);
    return token;
  }

  return (f, eventId, fanId, room) => {
    const status = f.oneOf("status", FAN_STATUSES);
    const now = f.num("now");
    const onSaleAt = f.num("onSaleAt");
    const position = f.num("position");
    const ahead = f.num("ahead");
    const advice = adviseFan({
      status,
      ahead,
      effectiveRate: f.num("rate"),
      roomFull: f.flag("full"),
      admitPerSecond: f.num("admitPerSecond"),
      untilOnSaleSeconds: Math.max(0, (onSaleAt - now) / 1000),
      abandonSeconds: f.num("abandonSeconds"),
      // past the on-sale and not drawn: the draw is running or waiting for its beacon
      drawPendingMs: status === "prequeue" && now >= onSaleAt && !f.flag("drawn") ? now - onSaleAt : undefined,
      ...(room?.drawGraceMs ? { drawGraceMs: room.drawGraceMs } : {}),
    });
    const common = { position, ahead, ...advice };
    switch (status) {
      case "prequeue":
        return { status, provisional: true, onSaleAt: iso(onSaleAt), ...common };
      case "waiting":
        return { status, provisional: false, ...common };
      case "admitted": {
        const sessionId = f.str("sessionId");
        const expiresAt = new Date(f.num("expiresAt"));
        const accessToken = accessTokenFor({
          fanId,
          eventId,
          sessionId,
          epoch: f.str("epoch"),
          issuedAt: new Date(f.num("admittedAt")),
          expiresAt,
        });
        return {
          status,
          provisional: false,
          sessionId,
          accessToken,
          accessExpiresAt: expiresAt.toISOString(),
          admittedAt: iso(f.num("admittedAt")),
          ...common,
        };
      }
      default:
        return { status, provisional: false, canRejoin: status !== "revoked", ...common };
    }
  };
}
