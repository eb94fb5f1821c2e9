/**
 * The fan's page: join the line, wait (position, people ahead, ETA, progress, the on-sale
 * countdown and the lottery commitment / revealed seed), then the seat map, the checkout with a
 * test card, and the confirmation. One page, one stage at a time; everything needed to pick up
 * where the fan was after a reload is in sessionStorage.
 *
 * This file wires the pieces: the model (fan-model.ts, the stages and the calls to the API), its
 * view (fan-view.ts), the seat map, the storage, and the start button and the others. The event is
 * the page's address (`?event=<id>`); an address with none says so and asks nothing.
 */
import { Api } from "./api.js";
import { apiBase, apiIsElsewhere, DEFAULT_EVENT_ID, eventIdFromUrl, inviteFromUrl } from "./config.js";
import { byId, setText } from "./dom.js";
import { FanModel } from "./fan-model.js";
import { FanPage, showNoEvent } from "./fan-view.js";
import { solveInWorker } from "./pow.js";
import { SeatMap } from "./seatmap.js";
import { clearSession, loadSession, rememberFanId, savedFanId, saveSession } from "./storage.js";

const FLASH = "flash";

const api = new Api(apiBase());

/**
 * The page of one event's line: the model and its view, the seat map, the storage, the start
 * button and the checkout's buttons.
 */
function open(eventId: string) {
  const seatMap: SeatMap = new SeatMap({
    api,
    eventId,
    flashRegion: FLASH,
    accessToken: () => model.session.accessToken,
    onHeld: (hold) => model.held(hold),
    onSessionEnded: (reason) => model.sessionEnded(reason),
  });
  const model: FanModel = new FanModel({
    api,
    eventId,
    seatMap,
    solver: solveInWorker,
    invite: inviteFromUrl(),
    store: {
      load: () => loadSession(eventId),
      save: (session) => saveSession(eventId, session),
      clear: () => clearSession(eventId),
      savedFanId: () => savedFanId(eventId),
      rememberFanId: (fanId) => rememberFanId(eventId, fanId),
    },
  });
  model.observe(new FanPage(model, FLASH));

  setText("event-id", eventId);
  // The start: one button. The event is the page's address (`?event=`); the fan is asked for
  // nothing: the gateway issues the fan id, and this device keeps it for the event (storage.ts).
  byId("start-returning").hidden = savedFanId(eventId) === null;
  byId<HTMLFormElement>("start-form").addEventListener("submit", (event) => {
    event.preventDefault();
    void model.begin();
  });
  byId<HTMLFormElement>("checkout-form").addEventListener("submit", (event) => {
    event.preventDefault();
    void model.pay(byId<HTMLSelectElement>("checkout-token").value);
  });
  byId("checkout-release").addEventListener("click", () => void model.release());
  byId("checkout-back").addEventListener("click", () => void model.backToMap());
  byId("done-restart").addEventListener("click", () => model.restart());
  setInterval(() => model.tick(), 1000);
  // A phone that slept, a tab shown again, a network back: ask for the place now (fan-model wake).
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") model.wake();
  });
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) model.wake();
  });
  window.addEventListener("online", () => model.wake());
  void model.loadEventName();
  model.resume();
}

/**
 * An address that names no event (`/` alone, or a malformed `?event=`): nothing to join, and
 * nothing asked. The demo's link when the box office runs the demo on-sale (`npm start`).
 */
async function noEvent() {
  showNoEvent();
  const demo = await api.call("GET", `/v1/events/${DEFAULT_EVENT_ID}/waiting-room`);
  if (!demo.ok) return;
  const link = new URLSearchParams({ event: DEFAULT_EVENT_ID });
  const apiParam = new URLSearchParams(location.search).get("api");
  if (apiParam !== null) link.set("api", apiParam);
  byId<HTMLAnchorElement>("none-demo-link").search = link.toString();
  byId("none-demo").hidden = false;
}

function start() {
  const base = api.base;
  if (apiIsElsewhere(base)) {
    const note = byId("api-note");
    note.hidden = false;
    note.textContent = `This page talks to the box office at ${base}.`;
  }
  const eventId = eventIdFromUrl();
  if (eventId) open(eventId);
  else void noEvent();
}

start();
