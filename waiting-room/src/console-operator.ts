/**
 * The console's sale controls and records: open now, close the sale, end the event, revoke a fan
 * (each through the confirmation dialog), and the two logs: the waiting room's settings history
 * (old and new values, who, when) and the action log (every operator call: which token, what,
 * the answer). The logs are read when the console connects, after each action and on "Refresh",
 * never on the second-by-second poll: a dashboard should not cost a DynamoDB Query a second.
 */
import type { Api } from "./api.js";
import type { Change } from "./console-model.js";
import { byId, h, setText, showMessage } from "./dom.js";
import { type Message, message } from "./format.js";

export interface SaleControlsDeps {
  api: Api;
  token(): string | null;
  eventId(): string;
  confirm(title: string, changes: Change[], warning: string): Promise<boolean>;
  flashRegion: string;
  /** After an action: the console polls its stats again. */
  changed(): void;
}

interface SettingsChange {
  at: string;
  kind: string;
  by?: string;
  settings: Record<string, { from?: string; to: string }>;
}

interface OperatorAction {
  at: string;
  operator: string;
  method: string;
  route: string;
  status: number;
  code?: string;
  summary?: Record<string, unknown>;
}

interface Action {
  title: string;
  path: string;
  json?: unknown;
  changes: Change[];
  warning: string;
  done(body: Record<string, unknown>): Message;
}

const time = (iso: string) => new Date(iso).toLocaleTimeString();

export function initSaleControls(deps: SaleControlsDeps) {
  const base = () => `/v1/admin/events/${encodeURIComponent(deps.eventId())}`;
  const say = (m: Message) => showMessage(deps.flashRegion, m);

  async function run(action: Action): Promise<void> {
    const token = deps.token();
    if (!token) return;
    if (!(await deps.confirm(action.title, action.changes, action.warning))) return;
    const res = await deps.api.call<Record<string, unknown>>("POST", `${base()}${action.path}`, {
      token,
      ...(action.json === undefined ? {} : { json: action.json }),
    });
    if (!res.ok) say(message("error", `${action.title.replace(/\?$/, "")}: not done.`, res.error.message));
    else say(action.done(res.body));
    deps.changed();
    await refresh();
  }

  function renderHistory(changes: SettingsChange[]) {
    byId("history-settings").replaceChildren(
      ...(changes.length === 0
        ? [h("li", { class: "muted" }, "No changes yet.")]
        : changes.map((c) =>
            h(
              "li",
              {},
              h("time", { datetime: c.at }, time(c.at)),
              ` ${c.kind}${c.by ? ` by ${c.by}` : ""}: `,
              Object.entries(c.settings)
                .map(([name, v]) => (v.from === undefined ? `${name} ${v.to}` : `${name} ${v.from} → ${v.to}`))
                .join(", "),
            ),
          )),
    );
  }

  function renderActions(actions: OperatorAction[]) {
    byId("history-actions").replaceChildren(
      ...(actions.length === 0
        ? [h("li", { class: "muted" }, "No operator actions yet.")]
        : actions.map((a) =>
            h(
              "li",
              {},
              h("time", { datetime: a.at }, time(a.at)),
              " ",
              h("strong", {}, a.operator),
              ` ${a.method} ${a.route.replace("/v1/admin/events/{eventId}", "") || "/"} → ${a.status}${a.code ? ` ${a.code}` : ""}`,
              a.summary ? h("span", { class: "small muted" }, ` ${JSON.stringify(a.summary)}`) : "",
            ),
          )),
    );
  }

  async function refresh(): Promise<void> {
    const token = deps.token();
    if (!token) return;
    const [history, actions] = await Promise.all([
      deps.api.call<{ changes: SettingsChange[] }>("GET", `${base()}/waiting-room/history?limit=20`, { token }),
      deps.api.call<{ actions: OperatorAction[] }>("GET", `${base()}/action-log?limit=20`, { token }),
    ]);
    if (history.ok) renderHistory(history.body.changes);
    if (actions.ok) renderActions(actions.body.actions);
    setText(
      "history-updated",
      history.ok && actions.ok ? `Read ${new Date().toLocaleTimeString()}` : "Could not be read.",
    );
  }

  byId("sale-open-now").addEventListener(
    "click",
    () =>
      void run({
        title: `Open ${deps.eventId()} now?`,
        path: "/open-now",
        changes: [{ field: "On-sale", from: "scheduled", to: "now" }],
        warning: "The pre-queue is drawn and admission starts at once; the event can no longer be replaced.",
        done: (b) =>
          message(
            "success",
            b.changed ? "The sale is open." : "The sale was open already.",
            `On sale since ${String(b.onSaleAt)}`,
          ),
      }),
  );
  byId("sale-close").addEventListener(
    "click",
    () =>
      void run({
        title: `Close the sale of ${deps.eventId()}?`,
        path: "/close-sale",
        changes: [{ field: "Waiting room", from: "taking fans", to: "closed" }],
        warning: "No new fans join and nobody else is admitted. Fans already admitted may finish their checkout.",
        done: (b) => message("success", b.changed ? "The sale is closed." : "The sale was closed already."),
      }),
  );
  byId("sale-end").addEventListener(
    "click",
    () =>
      void run({
        title: `End ${deps.eventId()}?`,
        path: "/end",
        changes: [{ field: "Event", from: "selling", to: "ended" }],
        warning:
          "Holds are refused from now on, for every fan; the room closes and the event's background jobs end. " +
          "Purchases and the audit stay readable. This cannot be undone.",
        done: (b) => message("success", "The event has ended.", `Closed at ${String(b.closedAt)}`),
      }),
  );
  byId<HTMLFormElement>("revoke-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = byId<HTMLInputElement>("revoke-fan");
    const fanId = input.value.trim();
    if (!fanId) {
      say(message("warning", "Enter the fan id to revoke."));
      input.focus();
      return;
    }
    void run({
      title: `Revoke ${fanId}?`,
      path: "/revocations",
      json: { fanId },
      changes: [{ field: fanId, from: "admitted", to: "revoked" }],
      warning: "The fan's access token stops working at once and the fan may not join this event again.",
      done: (b) => {
        input.value = "";
        return message(
          "success",
          `${fanId} is revoked.`,
          b.freed ? "Their slot went to the next fan." : "The session had ended already.",
        );
      },
    });
  });
  byId("history-refresh").addEventListener("click", () => void refresh());

  return { refresh };
}
