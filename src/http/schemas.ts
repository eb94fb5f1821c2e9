/** Schemas shared by several routes (API.md conventions). */
import { z } from "@hono/zod-openapi";

export const ID = /^[A-Za-z0-9_]{1,32}$/;

export const EventIdParam = z.object({
  eventId: z
    .string()
    .regex(ID, "must match ^[A-Za-z0-9_]{1,32}$")
    .openapi({ param: { name: "eventId", in: "path" }, example: "finals26" }),
});

export const SectionParams = EventIdParam.extend({
  sectionId: z
    .string()
    .regex(ID, "must match ^[A-Za-z0-9_]{1,32}$")
    .openapi({ param: { name: "sectionId", in: "path" }, example: "A" }),
});

export const HoldParams = EventIdParam.extend({
  holdId: z
    .string()
    .min(1)
    .max(64)
    .openapi({ param: { name: "holdId", in: "path" } }),
});

/**
 * 1..128 printable characters: no control characters and no lone surrogate (half of a UTF-16 pair
 * is no character; UTF-8 would turn it into U+FFFD, another fan), no line or paragraph separator,
 * no U+FFFD (invalid UTF-8 in the body decodes to it). The waiting room's FAN_ID_PATTERN says the
 * same; the schema refuses it first, with the field named.
 */
export const FanId = z
  .string()
  .min(1)
  .max(128)
  .refine((s) => !/[\p{Cc}\p{Cs}\p{Zl}\p{Zp}\uFFFD]/u.test(s), "must be printable characters");

export const SeatId = z
  .string()
  .regex(/^[A-Za-z0-9_]{1,32}-[A-Za-z0-9_]{1,32}-[A-Za-z0-9_]{1,32}$/, "must be <section>-<row>-<number>");

export const bearerSecurity = [{ bearer: [] }];
