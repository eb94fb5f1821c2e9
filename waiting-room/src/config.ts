/**
 * Where the pages find the API and which event they show. By default the API is the page's own
 * origin (the gateway serves the pages). A CDN deployment bakes another base in at build time
 * (ONSALE_API_BASE, see waiting-room/build.mjs) or passes `?api=https://gateway.example` in the
 * link. The event comes from `?event=<id>`, else DEFAULT_EVENT_ID.
 */
declare const __API_BASE__: string;

/** Set at build time; empty means "the page's origin". */
export const API_BASE_AT_BUILD: string = typeof __API_BASE__ === "string" ? __API_BASE__ : "";
/** The event `npm start` creates for a demo on-sale. */
export const DEFAULT_EVENT_ID = "demo";

const EVENT_ID = /^[A-Za-z0-9_]{1,32}$/;

function httpUrl(value: string | null | undefined): string | null {
  if (!value) return null;
  try {
    const url = new URL(value, location.href);
    if (url.protocol !== "http:" && url.protocol !== "https:") return null;
    return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
  } catch {
    return null;
  }
}

export function apiBase(): string {
  const fromQuery = httpUrl(new URLSearchParams(location.search).get("api"));
  return fromQuery ?? httpUrl(API_BASE_AT_BUILD) ?? location.origin;
}

/** True when the page talks to an API on another origin than its own (worth telling the user). */
export function apiIsElsewhere(base: string): boolean {
  return new URL(base).origin !== location.origin;
}

export function eventIdFromUrl(): string | null {
  const id = new URLSearchParams(location.search).get("event");
  return id && EVENT_ID.test(id) ? id : null;
}

export function isEventId(value: string): boolean {
  return EVENT_ID.test(value);
}

/** `?invite=<token>`: the operator's invite, passed on join (docs/waiting-room.md). */
export function inviteFromUrl(): string | undefined {
  const invite = new URLSearchParams(location.search).get("invite");
  return invite && invite.length <= 4_096 ? invite : undefined;
}
