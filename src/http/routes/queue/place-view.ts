import { z } from "@hono/zod-openapi";
import type { FanPlace } from "../../../waiting-room/index.js";

export const FanStatus = z
  .enum(["prequeue", "waiting", "admitted", "abandoned", "completed", "expired", "revoked"])
  .openapi({
    description:
      "prequeue/waiting/admitted as in the contract; abandoned (stopped polling; join again for a place at the back), " +
      "completed (bought), expired (session ran out), revoked (by the operator)",
  });

export function placeView(place: FanPlace) {
  return {
    position: place.position,
    status: place.status,
    provisional: place.provisional,
    ahead: place.ahead,
    etaSeconds: place.etaSeconds,
    pollAfterSeconds: place.pollAfterSeconds,
  };
}
