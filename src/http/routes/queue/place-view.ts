import { z } from "@hono/zod-openapi";
import type { FanPlace } from "../../../waiting-room/index.js";

export const FanStatus = z
  .enum(["prequeue", "waiting", "admitted", "abandoned", "completed", "expired", "revoked"])
  .openapi({
    description:
      "prequeue/waiting/admitted as in the contract; abandoned (stopped polling; join again for a place at the back), " +
      "completed (bought), expired (session ran out), revoked (by the operator)",
  });

/** The advice's fields in the join and status bodies' schemas. */
export const Advice = {
  etaSeconds: z.number().nullable(),
  pollAfterSeconds: z.number().openapi({ description: "The coarse advice: poll no sooner than this" }),
  pollAfterMs: z
    .number()
    .int()
    .optional()
    .openapi({
      description:
        "When to poll, scheduled on the fan's ETA (milliseconds): follow it without a jitter of your own and the " +
        "poll lands as the turn comes. Absent while the fan can only wait (paused, closed, admitted or done).",
    }),
};

export function placeView(place: FanPlace) {
  return {
    position: place.position,
    status: place.status,
    provisional: place.provisional,
    ahead: place.ahead,
    etaSeconds: place.etaSeconds,
    pollAfterSeconds: place.pollAfterSeconds,
    ...(place.pollAfterMs !== undefined ? { pollAfterMs: place.pollAfterMs } : {}),
  };
}
