/**
 * The one table from the scripts' negative return codes to domain outcomes. Each script's header
 * lists which of these it can return.
 */
export const SCRIPT_OUTCOMES = {
  "-1": "not_found",
  "-2": "not_joined",
  "-3": "closed",
  "-4": "revoked",
  "-5": "already_open",
  "-6": "unknown_session",
  "-7": "not_drawn",
} as const;

export type ScriptOutcome = (typeof SCRIPT_OUTCOMES)[keyof typeof SCRIPT_OUTCOMES];

/** What each outcome means, for logs and for the gateway's error messages. */
export const OUTCOME_MESSAGES: Record<ScriptOutcome, string> = {
  not_found: "no waiting room is configured for this event",
  not_joined: "this fan has no place in this event's line",
  closed: "the waiting room is closed",
  revoked: "this fan's session was revoked",
  already_open: "the waiting room has opened; its on-sale time can no longer change",
  unknown_session: "no such session in this event",
  not_drawn: "the pre-queue has not been drawn yet",
};

export class UnknownScriptCode extends Error {
  override name = "UnknownScriptCode";
}

/** The outcome a negative reply stands for; `null` when the reply is a result, not a code. */
export function scriptOutcome(reply: unknown): ScriptOutcome | null {
  if (typeof reply !== "number") return null;
  if (reply >= 0) return null;
  const outcome = (SCRIPT_OUTCOMES as Record<string, ScriptOutcome | undefined>)[String(reply)];
  if (!outcome) throw new UnknownScriptCode(`waiting-room script returned unknown code ${reply}`);
  return outcome;
}
