import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { MAX_POW_BITS } from "../../../waiting-room/proof-of-work.js";
import { ADMIT_RATE_RULE, isAdmitRate, MAX_ADMIT_PER_SECOND } from "../../../admit-rate.js";
import { operatorOnly } from "./guard.js";

/** Fans a second: 0 stops admission, else MIN_ADMIT_PER_SECOND..MAX_ADMIT_PER_SECOND (src/admit-rate.ts). */
const AdmitRate = z.number().min(0).max(MAX_ADMIT_PER_SECOND).refine(isAdmitRate, ADMIT_RATE_RULE);

const AutoAdmitPatch = z
  .strictObject({
    enabled: z
      .boolean()
      .optional()
      .openapi({
        description:
          "true: the admission loop sets admitPerSecond every 5 s from measured capacity (sessions finishing, " +
          "the claim path's p99 latency, DynamoDB throttles); a manual admitPerSecond is then refused (409 " +
          "auto_admit_enabled) unless the same change sets enabled: false",
      }),
    minPerSecond: AdmitRate.optional().openapi({
      description: `the loop never sets less (default 0); ${ADMIT_RATE_RULE}`,
    }),
    maxPerSecond: AdmitRate.optional().openapi({
      description: `the loop never sets more (default ${MAX_ADMIT_PER_SECOND}); must not be below minPerSecond; ${ADMIT_RATE_RULE}`,
    }),
    targetClaimP99Ms: z.number().int().min(1).max(60_000).optional().openapi({
      description: "the hold path's p99 latency, across gateways, the loop backs off above (default 250)",
    }),
    maxThrottlesPerSecond: z.number().min(0).max(100_000).optional().openapi({
      description: "DynamoDB throttled attempts per second, across gateways, the loop backs off above (default 0)",
    }),
  })
  .refine((a) => Object.keys(a).length > 0, "name at least one loop setting")
  .refine((a) => a.minPerSecond === undefined || a.maxPerSecond === undefined || a.minPerSecond <= a.maxPerSecond, {
    message: "minPerSecond must not exceed maxPerSecond",
    path: ["minPerSecond"],
  })
  .openapi("AutoAdmitPatch", {
    description:
      'Closed-loop admission (docs/waiting-room.md "Admission that follows capacity"). Fields not given ' +
      "keep their values; the bounds are checked against the stored ones too (400).",
  });

const AutoAdmit = z
  .object({
    enabled: z.boolean(),
    minPerSecond: z.number(),
    maxPerSecond: z.number(),
    targetClaimP99Ms: z.number(),
    maxThrottlesPerSecond: z.number(),
  })
  .openapi("AutoAdmitSettings");

const Patch = z
  .strictObject({
    admitPerSecond: AdmitRate.optional().openapi({ description: ADMIT_RATE_RULE }),
    maxActive: z.number().int().min(1).max(10_000_000).optional(),
    sessionSeconds: z.number().int().min(10).max(86_400).optional(),
    abandonSeconds: z.number().int().min(5).max(3_600).optional(),
    paused: z.boolean().optional(),
    closed: z.boolean().optional().openapi({
      description: "true closes the room (as POST .../close-sale); false opens a closed one again",
    }),
    powBits: z
      .number()
      .int()
      .min(0)
      .max(MAX_POW_BITS)
      .optional()
      .openapi({
        description:
          "proof-of-work cost of a new place, in leading zero bits (about 2^bits hashes); 0 turns it off. " +
          "Challenges issued for fewer bits are refused from now on.",
      }),
    invites: z.boolean().optional().openapi({
      description: "true: a new place needs the operator's invite token (INVITE_SECRET / INVITE_PUBLIC_KEY)",
    }),
    autoAdmit: AutoAdmitPatch.optional(),
  })
  .refine((p) => Object.keys(p).length > 0, "name at least one setting")
  .openapi("WaitingRoomPatch");

const Settings = z
  .object({
    onSaleAt: z.string(),
    admitPerSecond: z.number(),
    maxActive: z.number(),
    sessionSeconds: z.number(),
    abandonSeconds: z.number(),
    paused: z.boolean(),
    closed: z.boolean(),
    powBits: z.number().int(),
    invites: z.boolean(),
    autoAdmit: AutoAdmit,
  })
  .openapi("WaitingRoomSettings");

const route = createRoute({
  method: "patch",
  path: "/v1/admin/events/{eventId}/waiting-room",
  tags: ["operator"],
  summary: "Change admission settings; takes effect at once on every gateway instance",
  description:
    "`admitPerSecond: 0` pauses admission. A rate change applies from now on, never retroactively. Each change " +
    "is kept in the settings history (`GET .../waiting-room/history`: old and new values, the token's name). " +
    "With `autoAdmit.enabled` the admission loop owns admitPerSecond (its changes are logged `by: autoAdmit` " +
    "when the rate moved 10% or more since the last one logged; every step is in the stats history).",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam, body: { required: true, content: { "application/json": { schema: Patch } } } },
  responses: {
    200: { description: "settings in force", content: { "application/json": { schema: Settings } } },
    400: { description: "invalid", content: { "application/json": { schema: ErrorBody } } },
    409: {
      description: "`auto_admit_enabled`: admitPerSecond while the admission loop is on (it owns the rate)",
      content: { "application/json": { schema: ErrorBody } },
    },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    403: {
      description: "a read-only operator token, or `closed: false` for an event that has ended",
      content: { "application/json": { schema: ErrorBody } },
    },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const patchWaitingRoomRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const by = c.get("operator")?.name;
  const patch = c.req.valid("json");
  if (patch.closed === false) {
    // An ended event stays closed: its room opened again would place and admit fans who can hold
    // nothing (as open-now, which refuses it too).
    const event = await c.get("deps").events.get(eventId);
    if (event?.closedAt) throw new ApiError("forbidden", "the event has ended; its waiting room cannot be opened");
  }
  const result = await c.get("deps").waitingRoom.updateSettings(eventId, patch, by ? { by } : {});
  if (!result.ok) {
    if (result.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
    if (result.reason === "invalid")
      throw new ApiError("invalid_request", "invalid settings", { details: { issues: result.issues } });
    if (result.reason === "auto_admit_on") {
      throw new ApiError(
        "auto_admit_enabled",
        "the admission loop sets admitPerSecond while it is on; send autoAdmit: {enabled: false} with the rate",
      );
    }
    throw new ApiError("unavailable", "the waiting room is unavailable; retry", { retryAfter: 1 });
  }
  if (patch.closed === false) {
    // The event may have ended between the read above and this write (`end` commits the event,
    // then closes the room): read it again, and close the room again if it has. Whichever order the
    // two requests' writes took, the room ends closed.
    const event = await c.get("deps").events.get(eventId);
    if (event?.closedAt) {
      await c.get("deps").waitingRoom.updateSettings(eventId, { closed: true }, by ? { by } : {});
      throw new ApiError("forbidden", "the event has ended; its waiting room cannot be opened");
    }
  }
  const s = result.settings;
  // The waiting room kept them on the event too (src/gateway.ts roomKeeper), so a room that Redis
  // loses comes back with them (RELIABILITY.md).
  c.get("log").info({ eventId, settings: s }, "waiting-room settings changed");
  return c.json(
    {
      onSaleAt: s.onSaleAt,
      admitPerSecond: s.admitPerSecond,
      maxActive: s.maxActive,
      sessionSeconds: s.sessionSeconds,
      abandonSeconds: s.abandonSeconds,
      paused: s.paused,
      closed: s.closed,
      powBits: s.powBits,
      invites: s.invites,
      autoAdmit: s.autoAdmit,
    },
    200,
  );
});
