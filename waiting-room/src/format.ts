/**
 * How the pages put things into words: money, clocks, counts, and the message a model hands its
 * view. Nothing here touches the DOM, so the page models that use it run under plain Node too.
 */

/** Prices are integer minor units; this is only how they are shown. */
export const CURRENCY = "USD";

const money = new Intl.NumberFormat(undefined, { style: "currency", currency: CURRENCY });
export function formatMoney(minorUnits: number): string {
  return money.format(minorUnits / 100);
}

/** 0:07, 4:05, 1:02:09 */
export function formatClock(totalSeconds: number): string {
  const s = Math.max(0, Math.floor(totalSeconds));
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const seconds = String(s % 60).padStart(2, "0");
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, "0")}:${seconds}` : `${minutes}:${seconds}`;
}

/** "less than a minute", "about 3 minutes", "about 2 hours" */
export function formatEta(seconds: number): string {
  if (seconds < 60) return seconds <= 5 ? "a few seconds" : "less than a minute";
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) return `about ${minutes} minute${minutes === 1 ? "" : "s"}`;
  const hours = Math.round(minutes / 60);
  return `about ${hours} hours`;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString()} ${n === 1 ? one : many}`;
}

export function randomHex(bytes: number): string {
  const buf = new Uint8Array(bytes);
  crypto.getRandomValues(buf);
  return Array.from(buf, (b) => b.toString(16).padStart(2, "0")).join("");
}

export type MessageKind = "info" | "success" | "warning" | "error";
export interface MessageAction {
  label: string;
  run: () => void;
}

/** What a model wants the person told; a view shows it (dom.ts `flash`). */
export interface Message {
  kind: MessageKind;
  title: string;
  text?: string;
  actions?: MessageAction[];
}

export function message(kind: MessageKind, title: string, text = "", actions: MessageAction[] = []): Message {
  return { kind, title, text, actions };
}
