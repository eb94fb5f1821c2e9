/**
 * What the fan page remembers. The fan id the gateway issued for an event lives in localStorage
 * (the same fan on this device tomorrow gets its place back with it: it is the place's key, so it
 * is kept per event and never shown); tokens, the hold and the purchase live in sessionStorage (this tab only, gone when it
 * closes). Storage can be unavailable (private modes, blocked cookies): then it is kept in memory.
 */
import type { FanSession } from "./fan-session.js";

const memory = new Map<string, string>();

function read(store: "local" | "session", key: string): string | null {
  try {
    return (store === "local" ? localStorage : sessionStorage).getItem(key);
  } catch {
    return memory.get(`${store}:${key}`) ?? null;
  }
}

function write(store: "local" | "session", key: string, value: string | null): void {
  try {
    const s = store === "local" ? localStorage : sessionStorage;
    if (value === null) s.removeItem(key);
    else s.setItem(key, value);
  } catch {
    if (value === null) memory.delete(`${store}:${key}`);
    else memory.set(`${store}:${key}`, value);
  }
}

const fanIdKey = (eventId: string) => `onsale.fanId.${eventId}`;
const sessionKey = (eventId: string) => `onsale.event.${eventId}`;
const OPERATOR_TOKEN_KEY = "onsale.operatorToken";

/** The fan id this device holds a place under in the event's line (the gateway issued it), or null. */
export function savedFanId(eventId: string): string | null {
  return read("local", fanIdKey(eventId));
}

/** Keeps the event's fan id on this device; null forgets it (the gateway did not take it). */
export function rememberFanId(eventId: string, fanId: string | null): void {
  write("local", fanIdKey(eventId), fanId);
}

export function loadSession(eventId: string): FanSession | null {
  const raw = read("session", sessionKey(eventId));
  if (!raw) return null;
  try {
    const parsed = JSON.parse(raw) as FanSession;
    return typeof parsed.fanId === "string" ? parsed : null;
  } catch {
    return null;
  }
}

export function saveSession(eventId: string, session: FanSession): void {
  write("session", sessionKey(eventId), JSON.stringify(session));
  // The commitment seen at join outlives the tab: the lottery page checks the seed against it.
  if (session.commitment && recordedCommitment(eventId) === null)
    write("local", commitmentKey(eventId), session.commitment);
}

const commitmentKey = (eventId: string) => `onsale.commitment.${eventId}`;

/** The lottery commitment this device recorded when its fan joined the event's line, or null. */
export function recordedCommitment(eventId: string): string | null {
  const value = read("local", commitmentKey(eventId));
  return value && /^[0-9a-f]{64}$/.test(value) ? value : null;
}

export function clearSession(eventId: string): void {
  write("session", sessionKey(eventId), null);
}

export function operatorToken(): string | null {
  return read("session", OPERATOR_TOKEN_KEY);
}

export function rememberOperatorToken(token: string | null): void {
  write("session", OPERATOR_TOKEN_KEY, token);
}
