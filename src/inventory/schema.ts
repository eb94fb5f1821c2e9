/**
 * What an event may look like. The gateway can reuse `eventInputSchema` for the PUT body; the
 * inventory checks again, because it is the one that writes the seats.
 */
import { z } from "zod";
import { ADMIT_RATE_RULE, isAdmitRate, MAX_ADMIT_PER_SECOND } from "../admit-rate.js";
import { drandChainSchema } from "../lottery/drand.js";
import { FAN_ID_MODES } from "../waiting-room/fan-ids.js";
import { ID_PATTERN, MAX_ROW_OR_NUMBER } from "./keys.js";
import { MAX_SEATS_PER_FAN } from "./limits.js";
import type { EventInput } from "./types.js";

/** A BatchWriteItem-built layout larger than this is almost certainly a typo in `rows`. */
export const MAX_SEATS_PER_EVENT = 250_000;

const id = z.string().regex(ID_PATTERN, "must match ^[A-Za-z0-9_]{1,32}$");
/**
 * A price in minor units. At least 1: every seat is paid for through the saga, and a provider
 * refuses a charge of 0, so a free seat could never be bought (free events are not supported).
 */
const money = z.number().int().min(1, "must be at least 1 minor unit (free seats are not supported)").max(100_000_000);

export const sectionSchema = z.object({
  id,
  tier: z.string().min(1).max(64),
  price: money,
  rows: z.number().int().min(1).max(MAX_ROW_OR_NUMBER),
  seatsPerRow: z.number().int().min(1).max(MAX_ROW_OR_NUMBER),
});

export const generalAdmissionSchema = z.object({
  id,
  tier: z.string().min(1).max(64),
  price: money,
  capacity: z.number().int().min(1).max(10_000_000),
});

export const waitingRoomSchema = z.object({
  // The one range of a rate (src/admit-rate.ts): the room refuses what this would let through.
  admitPerSecond: z.number().min(0).max(MAX_ADMIT_PER_SECOND).refine(isAdmitRate, ADMIT_RATE_RULE),
  maxActive: z.number().int().min(1),
  sessionSeconds: z.number().int().min(1),
  /**
   * The drand chain (its `/info`: chainHash, publicKey, genesisTime, period, scheme) whose round,
   * the first published at or after the pre-queue's close, is the lottery's beacon.
   */
  drand: drandChainSchema.optional(),
  /**
   * Who names the fans (src/waiting-room/fan-ids.ts): `any` (the default) takes the join's fan id
   * as given; `issued` takes only fan ids the gateway issued for this event.
   */
  fanIds: z.enum(FAN_ID_MODES).optional(),
});

export const eventInputSchema = z
  .object({
    name: z.string().min(1).max(200),
    onSaleAt: z.iso.datetime({ offset: false }),
    holdSeconds: z.number().int().min(1).max(86_400),
    maxSeatsPerFan: z.number().int().min(1).max(MAX_SEATS_PER_FAN),
    sections: z.array(sectionSchema).max(1_000).default([]),
    generalAdmission: z.array(generalAdmissionSchema).max(100).default([]),
    waitingRoom: waitingRoomSchema,
  })
  .superRefine((event, ctx) => {
    const ids = [...event.sections.map((s) => s.id), ...event.generalAdmission.map((g) => g.id)];
    const dup = ids.find((v, i) => ids.indexOf(v) !== i);
    if (dup !== undefined) {
      ctx.addIssue({ code: "custom", message: `duplicate section or area id ${dup}`, path: ["sections"] });
    }
    const seats = event.sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0);
    if (seats > MAX_SEATS_PER_EVENT) {
      ctx.addIssue({ code: "custom", message: `${seats} seats exceed ${MAX_SEATS_PER_EVENT}`, path: ["sections"] });
    }
    if (event.waitingRoom.drand && Date.parse(event.onSaleAt) <= Date.now()) {
      // The draw's round is the first published at or after the close: a close in the past would
      // pick a round already published, chosen by its date.
      ctx.addIssue({
        code: "custom",
        message: "with a drand chain the on-sale time must be ahead (its round must be unpublished)",
        path: ["onSaleAt"],
      });
    }
    if (event.sections.length === 0 && event.generalAdmission.length === 0) {
      ctx.addIssue({ code: "custom", message: "an event needs a section or a general-admission area", path: [] });
    }
  });

export function parseEventInput(input: unknown): { ok: true; value: EventInput } | { ok: false; issues: string[] } {
  const parsed = eventInputSchema.safeParse(input);
  if (parsed.success) return { ok: true, value: parsed.data };
  return {
    ok: false,
    issues: parsed.error.issues.map((i) => `${i.path.length ? i.path.join(".") : "(event)"}: ${i.message}`),
  };
}
