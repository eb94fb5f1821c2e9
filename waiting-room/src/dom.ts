/** Tiny DOM helpers. Text always goes in through textContent: nothing from the API is parsed as HTML. */
import type { Message, MessageAction, MessageKind } from "./format.js";

type Child = Node | string | number | null | undefined | false;
type AttrValue = string | number | boolean | null | undefined | ((event: Event) => void);

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, AttrValue> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === "function") el.addEventListener(name.replace(/^on/, ""), value);
    else if (name === "class") el.className = String(value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
}

export function setText(id: string, text: string | number): void {
  byId(id).textContent = String(text);
}

/**
 * Shows one message in a live region (errors are alerts, the rest polite), with optional action
 * buttons. A new message replaces the old one.
 */
export function flash(
  regionId: string,
  kind: MessageKind,
  title: string,
  text = "",
  actions: MessageAction[] = [],
): void {
  const region = byId(regionId);
  region.replaceChildren(
    h(
      "div",
      { class: `msg msg-${kind}`, role: kind === "error" || kind === "warning" ? "alert" : "status" },
      h(
        "button",
        {
          type: "button",
          class: "msg-close",
          "aria-label": "Dismiss this message",
          onclick: () => region.replaceChildren(),
        },
        "×",
      ),
      h("p", { class: "msg-title" }, title),
      text ? h("p", {}, text) : null,
      actions.length > 0
        ? h(
            "div",
            { class: "actions" },
            ...actions.map((a) => h("button", { type: "button", class: "secondary", onclick: () => a.run() }, a.label)),
          )
        : null,
    ),
  );
}

export function clearFlash(regionId: string): void {
  byId(regionId).replaceChildren();
}

export function showMessage(regionId: string, m: Message): void {
  flash(regionId, m.kind, m.title, m.text, m.actions);
}
