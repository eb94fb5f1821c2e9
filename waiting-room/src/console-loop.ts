/**
 * The console's "Admission loop" section: what the loop is set to, the switch that turns it on
 * or off, and the form for its bounds and targets, so an operator never needs curl to move them
 * mid-sale. Each change goes through the confirmation dialog; the checks and the patch are the
 * model's (console-bounds.ts), this file only draws them and keeps the operator's typing.
 */
import type { Change, ConsoleModel } from "./console-model.js";
import { rate } from "./console-model.js";
import type { BoundsField, BoundsText } from "./console-bounds.js";
import { byId, setText, showMessage } from "./dom.js";
import type { AutoAdmitSettings, Stats } from "./types.js";

export interface LoopControlsDeps {
  model: ConsoleModel;
  confirm(title: string, changes: Change[], warning: string): Promise<boolean>;
  flashRegion: string;
}

const INPUTS: Record<BoundsField, { id: string; from: (a: Partial<AutoAdmitSettings>) => number | undefined }> = {
  min: { id: "bounds-min", from: (a) => a.minPerSecond },
  max: { id: "bounds-max", from: (a) => a.maxPerSecond },
  p99: { id: "bounds-p99", from: (a) => a.targetClaimP99Ms },
  throttles: { id: "bounds-throttles", from: (a) => a.maxThrottlesPerSecond },
};
const FIELDS = Object.keys(INPUTS) as BoundsField[];
const input = (field: BoundsField) => byId<HTMLInputElement>(INPUTS[field].id);

export function initLoopControls(deps: LoopControlsDeps) {
  const { model } = deps;

  /** The loop's settings as the last poll read them; a bound being typed is left alone. */
  function render(stats: Stats) {
    const a = stats.waitingRoom?.settings?.autoAdmit;
    byId("loop-figure").dataset.enabled = a?.enabled ? "true" : "false";
    // While the loop is on it owns the rate: the gateway would refuse a hand-set one (409).
    const rateInput = byId<HTMLInputElement>("settings-rate");
    rateInput.disabled = a?.enabled === true;
    rateInput.title = a?.enabled ? "Set by the admission loop while it is on" : "";
    const toggle = byId<HTMLButtonElement>("loop-toggle");
    toggle.hidden = !a;
    toggle.dataset.action = a?.enabled ? "off" : "on";
    toggle.textContent = a?.enabled ? "Turn the loop off…" : "Turn the loop on…";
    byId("bounds-form").hidden = !a;
    if (a) prefill(a);
    setText(
      "loop-settings",
      !a
        ? "Unknown: this gateway does not say."
        : a.enabled
          ? `On: sets admitPerSecond every 5 s within ${rate(a.minPerSecond)}–${rate(a.maxPerSecond)}/s, ` +
            `backing off above a claim p99 of ${a.targetClaimP99Ms.toLocaleString()} ms or ` +
            `${a.maxThrottlesPerSecond.toLocaleString()} DynamoDB throttles/s.`
          : `Off: the rate is set by hand (bounds kept: ${rate(a.minPerSecond)}–${rate(a.maxPerSecond)}/s, ` +
            `p99 target ${a.targetClaimP99Ms.toLocaleString()} ms).`,
    );
  }

  /** As the rate field does: a field typed in (or focused) keeps what the operator wrote. */
  function prefill(a: Partial<AutoAdmitSettings>, force = false) {
    for (const field of FIELDS) {
      const el = input(field);
      const value = INPUTS[field].from(a);
      if (value === undefined || (!force && (el.dataset.dirty === "true" || document.activeElement === el))) continue;
      el.dataset.dirty = "false";
      el.value = String(value);
    }
  }

  function showErrors(errors: Partial<Record<BoundsField, string>>) {
    for (const field of FIELDS) {
      const text = errors[field] ?? "";
      setText(`${INPUTS[field].id}-error`, text);
      if (text) input(field).setAttribute("aria-invalid", "true");
      else input(field).removeAttribute("aria-invalid");
    }
  }

  async function applyBounds() {
    const typed = Object.fromEntries(FIELDS.map((f) => [f, input(f).value])) as BoundsText;
    const plan = model.planBounds(typed);
    if (!plan.ok) {
      showErrors(plan.errors);
      const first = FIELDS.find((f) => plan.errors[f]);
      if (first) input(first).focus();
      else showMessage(deps.flashRegion, plan.message);
      return;
    }
    showErrors({});
    if (!(await deps.confirm("Change the admission loop's bounds?", plan.changes, plan.warning))) return;
    // Applied: the fields show what is in force now. Refused: they keep what was typed, to fix.
    if ((await model.apply(plan.patch)) && model.inForce.autoAdmit) prefill(model.inForce.autoAdmit, true);
  }

  async function toggle() {
    const on = byId("loop-toggle").dataset.action === "on";
    const warning = on
      ? "The gateway sets admitPerSecond every 5 s from measured capacity, within the loop's bounds; a rate typed here is refused while it runs."
      : "admitPerSecond stays where the loop left it; set it by hand from now on.";
    const changes = [{ field: "Admission loop", from: on ? "off" : "on", to: on ? "on" : "off" }];
    if (await deps.confirm(on ? "Turn the admission loop on?" : "Turn the admission loop off?", changes, warning)) {
      await model.apply({ autoAdmit: { enabled: on } });
    }
  }

  byId("loop-toggle").addEventListener("click", () => void toggle());
  byId<HTMLFormElement>("bounds-form").addEventListener("submit", (event) => {
    event.preventDefault();
    void applyBounds();
  });
  for (const field of FIELDS) {
    input(field).addEventListener("input", () => {
      input(field).dataset.dirty = "true";
    });
  }

  return { render };
}
