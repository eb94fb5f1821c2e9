/**
 * The lottery page (`/lottery?event=<id>`): anyone recomputes an event's draw in the browser from
 * what the gateway publishes, and a fan finds their place from the fan id the fan page kept for the
 * event on this device (storage.ts: issued by the gateway, never typed). The fetching and the
 * checks are in lottery-model.ts, the recipe in lottery-recipe.ts; this file draws them.
 */
import { Api } from "./api.js";
import { apiBase, apiIsElsewhere, DEFAULT_EVENT_ID, eventIdFromUrl, isEventId } from "./config.js";
import { byId, clearFlash, flash, h, setText, showMessage } from "./dom.js";
import { plural } from "./format.js";
import {
  CHECK_LABELS,
  type CheckState,
  type CheckStates,
  checkInPage,
  type DrawChecker,
  LotteryModel,
  type LotteryView,
  PAGE_CHECK_NAMES,
  type PlaceResult,
  type Progress,
  type PublishedChain,
  type PublishedLottery,
  progressText,
  type Verdict,
} from "./lottery-model.js";
import type { DrawCheck } from "./lottery-recipe.js";
import { recordedCommitment, savedFanId } from "./storage.js";

declare const __LOTTERY_WORKER__: string;

const FLASH = "flash";
/** The worker's asset, named by the build (relative to the page, as every asset). */
const WORKER_ASSET = typeof __LOTTERY_WORKER__ === "string" ? __LOTTERY_WORKER__ : "";

/**
 * The checks in a Web Worker (lottery-worker.ts): sorting and hashing a large membership then
 * never holds the page up. Where no worker can be had, or it fails, the page does it in batches.
 */
const checkInWorker: DrawChecker = (draw, progress) => {
  const inPage = () => checkInPage()(draw, progress);
  if (!WORKER_ASSET || typeof Worker === "undefined") return inPage();
  return new Promise((resolve) => {
    let worker: Worker;
    try {
      worker = new Worker(new URL(`assets/${WORKER_ASSET}`, document.baseURI), { type: "module" });
    } catch {
      resolve(inPage());
      return;
    }
    worker.onmessage = (event: MessageEvent<{ progress?: { done: number; total: number }; check?: DrawCheck }>) => {
      const { progress: p, check } = event.data;
      if (p) {
        progress(p.done, p.total);
        return;
      }
      worker.terminate();
      resolve(check ?? inPage());
    };
    worker.onerror = (event) => {
      event.preventDefault();
      worker.terminate();
      resolve(inPage());
    };
    worker.postMessage(draw);
  });
};

/** "drand quicknet (League of Entropy mainnet) round 123" */
function roundName(drand: PublishedChain): string {
  return `drand ${drand.knownAs ?? `chain ${drand.chainHash}`} round ${drand.round}`;
}

const STATE_TEXT: Record<CheckState, string> = { pending: "…", pass: "PASS", fail: "FAIL" };

class LotteryPage implements LotteryView {
  published(lottery: PublishedLottery, recordedCommitment: string | null): void {
    byId("published").hidden = false;
    setText("draw-commitment", lottery.commitment);
    byId("draw-recorded-row").hidden = recordedCommitment === null;
    if (recordedCommitment !== null) {
      setText("draw-recorded", recordedCommitment);
      setText(
        "draw-recorded-note",
        recordedCommitment === lottery.commitment
          ? "the same as the one published now"
          : "NOT the one published now: the seed is checked against the one you recorded",
      );
    }
    setText("draw-seed", lottery.seed ?? "not revealed yet");
    setText("draw-membership", lottery.membershipHash ?? "—");
    setText("draw-beacon", lottery.seed ? lottery.beacon || "(none)" : "—");
    setText("draw-beacon-source", lottery.drand ? `from ${roundName(lottery.drand)}` : "");
    byId("draw-sealed").hidden = lottery.sealedOnly !== true;
    setText("draw-size", typeof lottery.size === "number" ? plural(lottery.size, "fan") : "—");
    byId("draw-pending").hidden = true;
    byId("verify").hidden = !lottery.seed;
    byId("place").hidden = false;
  }

  notDrawn(lottery: PublishedLottery, onSaleAt: number | null): void {
    byId("draw-pending").hidden = false;
    setText(
      "draw-close",
      onSaleAt === null ? "at the on-sale" : `at the on-sale, ${new Date(onSaleAt).toLocaleString()}`,
    );
    // Past the close, the draw waits for its drand round (however long: there is no draw without it).
    const waiting = lottery.awaitingBeacon === true && lottery.drand !== undefined;
    byId("draw-beacon-wait").hidden = !waiting;
    if (waiting && lottery.drand) {
      setText("draw-beacon-wait-source", roundName(lottery.drand));
      setText("draw-beacon-wait-at", new Date(lottery.drand.roundAt).toLocaleString());
    }
    byId("verify").hidden = true;
  }

  progress(p: Progress): void {
    setText("verify-progress", progressText(p));
    const share =
      p.phase === "done"
        ? 1
        : p.phase === "fetching"
          ? // Fetching is the first half of the work, ranking the second.
            (p.size === 0 ? 1 : Math.min(1, p.entries / p.size)) / 2
          : 0.5 + (p.total === 0 ? 1 : p.done / p.total) / 2;
    const percent = Math.round(share * 100);
    byId("verify-bar").setAttribute("aria-valuenow", String(percent));
    byId("verify-bar-fill").style.width = `${percent}%`;
  }

  checks(states: CheckStates): void {
    const names = PAGE_CHECK_NAMES.filter((name) => states[name] !== undefined);
    byId("checks").replaceChildren(
      ...names.map((name) =>
        h(
          "li",
          { "data-check": name, "data-state": states[name]! },
          h("span", { class: "check-state" }, STATE_TEXT[states[name]!]),
          " ",
          h("span", {}, CHECK_LABELS[name]),
        ),
      ),
    );
    const pending = names.some((name) => states[name] === "pending");
    if (pending) {
      const verdict = byId("verdict");
      verdict.dataset.state = "pending";
      verdict.textContent = "";
      byId("first-positions").hidden = true;
    }
  }

  verdict(v: Verdict): void {
    const out = byId("verdict");
    out.dataset.state = v.pass ? "pass" : "fail";
    if (v.pass) {
      out.textContent = "PASS: the published order is the draw, recomputed in this browser.";
    } else {
      const where =
        v.firstMismatch > 0 ? ` The published order departs from the draw at position ${v.firstMismatch}.` : "";
      const beacon = v.beaconProblem ? ` The beacon: ${v.beaconProblem}.` : "";
      out.textContent = `FAIL: ${plural(v.failed.length, "check")} failed (${v.failed.join(", ")}).${where}${beacon}`;
    }
    byId("first-positions").hidden = v.first.length === 0;
    byId("first-list").replaceChildren(...v.first.map((entry) => h("li", {}, h("code", { class: "hash" }, entry))));
  }

  place(r: PlaceResult): void {
    const out = byId("place-result");
    out.dataset.kind = r.kind;
    switch (r.kind) {
      case "invalid":
        out.textContent = "This browser hasn't joined this event's line: there is no place of yours to look up here.";
        return;
      case "unavailable":
        out.textContent = "Your place can't be looked up until the draw has been fetched.";
        return;
      case "waiting":
        out.textContent = "Still fetching the draw; your place shows as soon as it is in.";
        return;
      case "not-drawn":
        out.textContent = `The draw has not happened yet. Your entry will be ${r.entry}.`;
        return;
      case "absent":
        out.replaceChildren(
          "The fan id this browser joined with is not in the pre-queue (its entry ",
          h("code", { class: "hash" }, r.entry),
          " is not in the published membership).",
        );
        return;
      case "found":
        out.replaceChildren(
          h("strong", { id: "place-position" }, `Your drawn position: #${r.position.toLocaleString()}`),
          r.publishedPosition !== r.position
            ? ` (but the box office's list has you at #${r.publishedPosition.toLocaleString()})`
            : "",
          ". Your entry: ",
          h("code", { class: "hash" }, r.entry),
        );
        return;
    }
  }

  message(m: Parameters<LotteryView["message"]>[0]): void {
    if (m) showMessage(FLASH, m);
    else clearFlash(FLASH);
  }
}

function start() {
  const api = new Api(apiBase());
  if (apiIsElsewhere(api.base)) {
    const note = byId("api-note");
    note.hidden = false;
    note.textContent = `This page talks to the box office at ${api.base}.`;
  }
  const eventId = eventIdFromUrl();
  const eventInput = byId<HTMLInputElement>("event-input");
  eventInput.value = eventId ?? DEFAULT_EVENT_ID;
  byId<HTMLFormElement>("event-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = eventInput.value.trim();
    if (!isEventId(chosen)) {
      flash(FLASH, "warning", "That event id doesn't look right.", "Use letters, digits and _ (up to 32).");
      eventInput.focus();
      return;
    }
    // In the address, so the check can be shared and bookmarked.
    const url = new URL(location.href);
    url.searchParams.set("event", chosen);
    location.assign(url.toString());
  });
  if (!eventId) {
    flash(FLASH, "info", "Which event's draw?", "Type its event id and press the button.");
    return;
  }

  setText("published-event", eventId);
  const model = new LotteryModel({
    api,
    eventId,
    checker: checkInWorker,
    recordedCommitment: recordedCommitment(eventId),
  });
  model.observe(new LotteryPage());
  // The fan's own place, from the fan id the fan page kept for this event (never typed: it is the
  // place's key, issued by the gateway). Read at the press: the fan may have joined in another tab.
  if (savedFanId(eventId) === null) {
    setText(
      "place-hint",
      "This browser hasn't joined this event's line, so it has no place to look up. Open this page in the browser you joined with.",
    );
  }
  byId<HTMLFormElement>("place-form").addEventListener("submit", (event) => {
    event.preventDefault();
    void model.findPlace(savedFanId(eventId) ?? "");
  });
  void model.load();
}

try {
  start();
} catch (err) {
  // Never a blank page: say what broke.
  flash(FLASH, "error", "This page could not start.", err instanceof Error ? err.message : String(err));
}
