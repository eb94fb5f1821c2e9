/**
 * The admission loop's bounds and targets as the console changes them, with no DOM: the typed
 * values checked against the same limits the gateway's PATCH schema has
 * (src/http/routes/admin/waiting-room.ts, AutoAdmitPatch), so a mistake is named beside its field
 * instead of coming back as a 400 about the whole body, and a patch of only what changed, so
 * `enabled` (and any bound nobody touched) is never sent back stale from the last poll.
 */
import type { Change } from "./console-model.js";
import { type Message, message } from "./format.js";
import type { AutoAdmitSettings } from "./types.js";

export type BoundsField = "min" | "max" | "p99" | "throttles";
export type BoundsText = Record<BoundsField, string>;
type Bound = Exclude<keyof AutoAdmitSettings, "enabled">;

/** The form's fields in the order they are shown, checked and described. */
const FIELDS: readonly {
  field: BoundsField;
  setting: Bound;
  label: string;
  max: number;
  min: number;
  integer: boolean;
}[] = [
  { field: "min", setting: "minPerSecond", label: "Min admissions /s", min: 0, max: 100_000, integer: false },
  { field: "max", setting: "maxPerSecond", label: "Max admissions /s", min: 0, max: 100_000, integer: false },
  { field: "p99", setting: "targetClaimP99Ms", label: "Claim p99 target (ms)", min: 1, max: 60_000, integer: true },
  {
    field: "throttles",
    setting: "maxThrottlesPerSecond",
    label: "Max DynamoDB throttles /s",
    min: 0,
    max: 100_000,
    integer: false,
  },
];

/** A bounds change ready to confirm, or each field's problem (next to it) and what to say. */
export type BoundsPlan =
  | { ok: true; patch: { autoAdmit: Partial<AutoAdmitSettings> }; changes: Change[]; warning: string }
  | { ok: false; errors: Partial<Record<BoundsField, string>>; message: Message };

/** Checks the typed bounds against the loop's settings in force; an empty field keeps its value. */
export function planBounds(typed: BoundsText, inForce: Partial<AutoAdmitSettings> | undefined): BoundsPlan {
  if (!inForce || inForce.minPerSecond === undefined || inForce.maxPerSecond === undefined) {
    return { ok: false, errors: {}, message: message("warning", "The loop's settings are not known yet.") };
  }
  const errors: Partial<Record<BoundsField, string>> = {};
  const next: Partial<Record<Bound, number>> = {};
  for (const f of FIELDS) {
    const text = typed[f.field].trim();
    if (text === "") continue;
    const value = Number(text);
    if (!Number.isFinite(value) || value < f.min || value > f.max || (f.integer && !Number.isInteger(value))) {
      errors[f.field] = `${f.integer ? "A whole number" : "A number"} from ${f.min} to ${f.max.toLocaleString("en")}.`;
    } else {
      next[f.setting] = value;
    }
  }
  // The gateway checks the pair as it will be stored, so one typed bound is held to the other in force.
  const lo = next.minPerSecond ?? inForce.minPerSecond;
  const hi = next.maxPerSecond ?? inForce.maxPerSecond;
  if (!errors.min && !errors.max && lo > hi) {
    // Beside the bound the operator moved: lowering the max under the min is the max's mistake.
    if (hi !== inForce.maxPerSecond && lo === inForce.minPerSecond) {
      errors.max = `Must not be below the min (${lo}).`;
    } else {
      errors.min = `Must not be above the max (${hi}).`;
    }
  }
  if (Object.keys(errors).length > 0) {
    return { ok: false, errors, message: message("warning", "Check the loop's bounds.") };
  }
  const autoAdmit: Partial<AutoAdmitSettings> = {};
  const changes: Change[] = [];
  for (const f of FIELDS) {
    const value = next[f.setting];
    if (value === undefined || value === inForce[f.setting]) continue;
    autoAdmit[f.setting] = value;
    changes.push({ field: f.label, from: String(inForce[f.setting] ?? "?"), to: String(value) });
  }
  if (changes.length === 0) {
    return { ok: false, errors: {}, message: message("info", "Nothing to change.", "Edit a bound first.") };
  }
  const warning = inForce.enabled
    ? "The loop keeps to them from its next step (within 5 s); it stays on."
    : "The loop is off: they are kept for when it is turned on; the rate stays as set by hand.";
  return { ok: true, patch: { autoAdmit }, changes, warning };
}
