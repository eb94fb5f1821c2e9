/**
 * The waiting room's reply codes, in one table (the family's: each script's header lists which it
 * can return). Negative codes are refusals any line script may answer instead of its list;
 * session-active-3.lua, the claim path's one check, answers a code every time.
 */
import { codeTable, UnknownScriptCode } from "../redis/scripts.js";

export const SCRIPT_OUTCOMES = {
  "-1": "not_found",
  "-2": "not_joined",
  "-3": "closed",
  "-4": "revoked",
  "-5": "already_open",
  "-6": "unknown_session",
  "-7": "not_drawn",
  "-8": "not_closed",
  "-9": "draw_incomplete",
  "-10": "auto_admit_on",
  "-11": "auto_admit_bounds",
} as const;

export type ScriptOutcome = (typeof SCRIPT_OUTCOMES)[keyof typeof SCRIPT_OUTCOMES];

/** session-active-3.lua's answers. */
export const SESSION_ANSWERS = {
  "0": "ended",
  "1": "active",
  "2": "other_epoch",
  "3": "no_room",
} as const;

export type SessionAnswer = (typeof SESSION_ANSWERS)[keyof typeof SESSION_ANSWERS];

export const WAITING_ROOM_CODES = codeTable<ScriptOutcome | SessionAnswer>("waiting-room", {
  ...SCRIPT_OUTCOMES,
  ...SESSION_ANSWERS,
});

/** What each outcome means, for logs and for the gateway's error messages. */
export const OUTCOME_MESSAGES: Record<ScriptOutcome, string> = {
  not_found: "no waiting room is configured for this event",
  not_joined: "this fan has no place in this event's line",
  closed: "the waiting room is closed",
  revoked: "this fan's session was revoked",
  already_open: "the waiting room has opened; its on-sale time can no longer change",
  unknown_session: "no such session in this event",
  not_drawn: "the pre-queue has not been drawn yet",
  not_closed: "the pre-queue has not closed yet",
  draw_incomplete: "the draw has not written every place yet",
  auto_admit_on: "the admission loop sets admitPerSecond while it is on; turn it off in the same change",
  auto_admit_bounds: "autoAdmit.minPerSecond would exceed autoAdmit.maxPerSecond",
};

/** The outcome a negative reply stands for; `null` when the reply is a result, not a code. */
export function scriptOutcome(reply: unknown): ScriptOutcome | null {
  if (typeof reply !== "number" || reply >= 0) return null;
  return WAITING_ROOM_CODES.outcome(reply) as ScriptOutcome;
}

const ANSWERS: ReadonlySet<string> = new Set(Object.values(SESSION_ANSWERS));

/** What session-active-3.lua answered; any other code is the script and this table disagreeing. */
export function sessionAnswer(reply: unknown): SessionAnswer {
  const answer = WAITING_ROOM_CODES.outcome(reply);
  if (!ANSWERS.has(answer)) throw new UnknownScriptCode(`session-active returned ${String(reply)}`);
  return answer as SessionAnswer;
}
