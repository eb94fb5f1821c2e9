/**
 * The lottery page's model: fetches what the gateway publishes about an event's draw (the
 * waiting-room info's `lottery`, then every page of the drawn membership), recomputes the draw in
 * the browser (lottery-recipe.ts) and says, check by check, whether the published order is the
 * draw; and finds a fan's place from their fan id (hashed here, never sent anywhere).
 * No DOM: the page (lottery.ts) draws what the model hands its LotteryView.
 */
import type { ApiResult, CallOptions } from "./api.js";
import { checkDrandBeacon } from "./drand-check.js";
import { type Message, message, plural } from "./format.js";
import {
  CHECK_NAMES,
  type CheckName,
  canDigest,
  checkDraw,
  DEFAULT_PACE,
  type DrawCheck,
  entryOf,
  type Pace,
  type PublishedDraw,
} from "./lottery-recipe.js";

/** The waiting-room info's `lottery`, as published (seed and the rest once drawn). */
export interface PublishedLottery {
  commitment: string;
  seed?: string;
  membershipHash?: string;
  beacon?: string;
  /** The drand chain the event named and the round of the draw (the first at or after the close). */
  drand?: PublishedChain;
  /** The round recorded as the beacon, with its BLS signature. */
  beaconRound?: { round: number; signature: string; previousSignature?: string };
  /** The pre-queue has closed and the draw waits for its drand round. */
  awaitingBeacon?: boolean;
  /** Once drawn: when the pre-queue closed. */
  closedAt?: string;
  /** The room was recreated after a Redis loss: the draw as sealed in DynamoDB. */
  sealedOnly?: boolean;
  size?: number;
}

/** A drand chain as the gateway publishes it, with the round the draw takes. */
export interface PublishedChain {
  chainHash: string;
  publicKey: string;
  genesisTime: number;
  period: number;
  scheme: string;
  round: number;
  roundAt: string;
  knownAs?: string;
}

interface RoomInfo {
  state?: string;
  onSaleAt?: string;
  lottery?: PublishedLottery;
}

interface MembershipPage {
  size: number;
  entries: string[];
  firstPosition?: number;
  next?: string;
}

export type CheckState = "pending" | "pass" | "fail";

export type Progress =
  | { phase: "fetching"; page: number; pages: number; entries: number; size: number }
  | { phase: "ranking"; done: number; total: number }
  | { phase: "done"; entries: number };

export interface Verdict {
  pass: boolean;
  failed: PageCheckName[];
  /** What is wrong with the drand beacon, when its check failed. */
  beaconProblem?: string;
  /** First position where the published order departs from the recomputed one (0: none). */
  firstMismatch: number;
  /** The recomputed order's first positions. */
  first: string[];
}

export type PlaceResult =
  | { kind: "invalid" }
  | { kind: "unavailable" }
  | { kind: "waiting"; entry: string }
  | { kind: "not-drawn"; entry: string }
  | { kind: "absent"; entry: string }
  /** `position` in the recomputed draw; `publishedPosition` where the gateway's list has it. */
  | { kind: "found"; entry: string; position: number; publishedPosition: number };

/** The page's checks: the recipe's, and the drand beacon's for an event that names a chain. */
export type PageCheckName = CheckName | "beacon";
export const PAGE_CHECK_NAMES: readonly PageCheckName[] = [...CHECK_NAMES, "beacon"];
export type CheckStates = Partial<Record<PageCheckName, CheckState>>;

export interface LotteryView {
  /**
   * What the gateway published about the draw (called once the info is in), and the commitment
   * this device recorded when its fan joined (null: none recorded here).
   */
  published(lottery: PublishedLottery, recordedCommitment: string | null): void;
  /** Before the draw: only the commitment is out; the pre-queue closes at `onSaleAt` (epoch ms), when known. */
  notDrawn(lottery: PublishedLottery, onSaleAt: number | null): void;
  progress(p: Progress): void;
  checks(states: CheckStates): void;
  verdict(v: Verdict): void;
  place(r: PlaceResult): void;
  message(m: Message | null): void;
}

/** Runs the checks of a draw, reporting the ranking's progress (in the page, or in a worker). */
export type DrawChecker = (draw: PublishedDraw, progress: (done: number, total: number) => void) => Promise<DrawCheck>;

/** The checks in the page itself, a batch of digests at a time with a pause between batches. */
export function checkInPage(pace: Pace = DEFAULT_PACE): DrawChecker {
  return (draw, progress) => checkDraw(draw, { ...pace, progress });
}

export interface LotteryDeps {
  api: { call<T>(method: string, path: string, options?: CallOptions): Promise<ApiResult<T>> };
  eventId: string;
  /** Where the checks run; in the page (checkInPage) unless told otherwise. */
  checker?: DrawChecker;
  /** The in-page checker's pace, when no checker is given. */
  pace?: Pace;
  /** WebCrypto's presence (a test may take it away). */
  digestAvailable?: () => boolean;
  /**
   * The commitment this device recorded when its fan joined (storage.ts): the seed is checked
   * against it rather than against the one the gateway serves now.
   */
  recordedCommitment?: string | null;
}

/** "page 3 of ~12, 6,000 of 12,000 entries" */
export function progressText(p: Progress): string {
  if (p.phase === "fetching")
    return `Fetching the membership: page ${p.page.toLocaleString()} of ~${p.pages.toLocaleString()}, ${p.entries.toLocaleString()} of ${plural(p.size, "entry", "entries")}`;
  if (p.phase === "ranking")
    return `Recomputing the order: ${p.done.toLocaleString()} of ${plural(p.total, "entry", "entries")} ranked`;
  return `Done: ${plural(p.entries, "entry", "entries")} checked in this browser`;
}

export const CHECK_LABELS: Record<PageCheckName, string> = {
  commitment:
    "The revealed seed matches the commitment: the one this device kept when you joined, else the one published before the pre-queue opened",
  entriesWellFormed: "Every entry is a SHA-256 (64 hex characters) and none appears twice",
  size: "The membership has as many entries as the pre-queue held at its close",
  membershipHash: "The membership hash M, recomputed from the entries, matches the one recorded at the draw",
  order: "The order recomputed from the seed, M and the beacon matches the published order, place by place",
  beacon:
    "The beacon is the drand round first published after the close: its BLS signature verifies under the chain's public key, and the beacon is SHA-256 of it",
};

const MAX_PAGES = 100_000;

const allPending = (lottery?: PublishedLottery): CheckStates =>
  Object.fromEntries(
    PAGE_CHECK_NAMES.filter((name) => name !== "beacon" || lottery?.drand !== undefined).map((name) => [
      name,
      "pending",
    ]),
  ) as CheckStates;

// Arrays, not maps: a look-up is a scan (a millisecond at 100,000), while building a Map of every
// entry held the page up for most of a second in Chromium.
interface Membership {
  /** The recomputed draw: index i has position i + 1. */
  drawn: readonly string[];
  /** The gateway's list, as published. */
  listed: readonly string[];
}

type Loaded = { kind: "drawn"; membership: Membership } | { kind: "not-drawn" } | { kind: "failed" };

export class LotteryModel {
  private view: LotteryView | null = null;
  private generation = 0;
  private loaded: Promise<Loaded> = Promise.resolve({ kind: "failed" });
  private placeAsked = 0;
  /** The outcome of the last load (set when it ends). */
  check: DrawCheck | null = null;

  constructor(private readonly deps: LotteryDeps) {}

  observe(view: LotteryView): void {
    this.view = view;
  }

  private get checker(): DrawChecker {
    return this.deps.checker ?? checkInPage(this.deps.pace);
  }

  private digestAvailable(): boolean {
    return (this.deps.digestAvailable ?? canDigest)();
  }

  private path(rest: string): string {
    return `/v1/events/${encodeURIComponent(this.deps.eventId)}${rest}`;
  }

  /** Fetches and checks the draw; a later call (Try again) supersedes an earlier one. */
  load(): Promise<void> {
    const generation = ++this.generation;
    let settle: (l: Loaded) => void = () => {};
    this.loaded = new Promise<Loaded>((resolve) => {
      settle = resolve;
    });
    return this.run(generation)
      .catch((): Loaded => {
        this.say(message("error", "Something went wrong while checking the draw.", "Reload the page to try again."));
        return { kind: "failed" };
      })
      .then((outcome) => settle(outcome));
  }

  private current(generation: number): boolean {
    return generation === this.generation;
  }

  private say(m: Message | null): void {
    this.view?.message(m);
  }

  private refused(res: ApiResult<unknown> & { ok: false }, what: string): Loaded {
    const retry = { label: "Try again", run: () => void this.load() };
    if (res.status === 404)
      this.say(
        message(
          "error",
          `There is no on-sale called "${this.deps.eventId}".`,
          "Check the event id in your link, or type another one in the box below.",
        ),
      );
    else if (res.status === 0)
      this.say(
        message(
          "error",
          "We can't reach the box office right now.",
          `${what} could not be fetched. Check your connection, then try again.`,
          [retry],
        ),
      );
    else if (res.status === 429 || res.status >= 500)
      this.say(
        message(
          "warning",
          "The box office is busy.",
          `${what} could not be fetched (${res.status}${res.retryAfter ? `; retry in ${plural(res.retryAfter, "second")}` : ""}).`,
          [retry],
        ),
      );
    else
      this.say(
        message("error", `${what} could not be fetched.`, `The box office answered: ${res.error.message}`, [retry]),
      );
    return { kind: "failed" };
  }

  private async run(generation: number): Promise<Loaded> {
    this.check = null;
    this.say(null);
    this.view?.checks(allPending());
    const info = await this.deps.api.call<RoomInfo>("GET", this.path("/waiting-room"));
    if (!this.current(generation)) return { kind: "failed" };
    if (!info.ok) return this.refused(info, "The event's draw");
    const lottery = info.body?.lottery;
    if (!lottery || typeof lottery.commitment !== "string") {
      this.say(message("error", "This box office publishes no lottery commitment for the event."));
      return { kind: "failed" };
    }
    const recorded = this.deps.recordedCommitment ?? null;
    this.view?.published(lottery, recorded);
    if (lottery.drand) this.view?.checks(allPending(lottery));
    const onSale = Date.parse(info.body.onSaleAt ?? "");
    const onSaleAt = Number.isFinite(onSale) ? onSale : null;
    if (!lottery.seed) {
      this.view?.notDrawn(lottery, onSaleAt);
      return { kind: "not-drawn" };
    }
    if (typeof lottery.membershipHash !== "string" || typeof lottery.size !== "number") {
      this.say(
        message(
          "warning",
          "This box office reveals the seed but not the membership hash.",
          "The order cannot be recomputed here; the seed can still be checked against the commitment by hand.",
        ),
      );
      return { kind: "failed" };
    }
    if (!this.digestAvailable()) {
      this.say(
        message(
          "error",
          "This browser can't compute SHA-256 on this page.",
          "WebCrypto needs a secure page (https, or localhost). `npm run verify-lottery` checks the same draw from a terminal.",
        ),
      );
      return { kind: "failed" };
    }

    const entries: string[] = [];
    const seen = new Set<string>();
    let cursor: string | undefined;
    let perPage = 0;
    for (let page = 1; ; page++) {
      const res = await this.deps.api.call<MembershipPage>(
        "GET",
        this.path(`/queue/lottery${cursor === undefined ? "" : `?cursor=${encodeURIComponent(cursor)}`}`),
      );
      if (!this.current(generation)) return { kind: "failed" };
      if (!res.ok) {
        if (res.status === 409 && res.error.code === "not_drawn") {
          this.view?.notDrawn(lottery, onSaleAt);
          return { kind: "not-drawn" };
        }
        return this.refused(res, `Page ${page} of the membership`);
      }
      const body = res.body;
      if (!body || !Array.isArray(body.entries) || !body.entries.every((e) => typeof e === "string")) {
        this.say(message("error", `Page ${page} of the membership is not what the API describes.`));
        return { kind: "failed" };
      }
      entries.push(...body.entries);
      perPage = Math.max(perPage, body.entries.length);
      const size = lottery.size;
      this.view?.progress({
        phase: "fetching",
        page,
        pages: Math.max(page, perPage === 0 ? 1 : Math.ceil(size / perPage)),
        entries: entries.length,
        size,
      });
      const next = typeof body.next === "string" ? body.next : undefined;
      if (next === undefined || body.entries.length === 0) break;
      if (seen.has(next) || page >= MAX_PAGES) {
        this.say(
          message("error", "The membership's pages go round in a circle.", "The list cannot be read to its end."),
        );
        return { kind: "failed" };
      }
      seen.add(next);
      cursor = next;
    }

    const beaconCheck = lottery.drand
      ? await checkDrandBeacon(lottery.drand, lottery.beaconRound, lottery.beacon, lottery.closedAt)
      : undefined;
    const check = await this.checker(
      {
        commitment: recorded ?? lottery.commitment,
        seed: lottery.seed,
        membershipHash: lottery.membershipHash,
        beacon: lottery.beacon,
        size: lottery.size,
        entries,
      },
      (done, total) => {
        if (this.current(generation)) this.view?.progress({ phase: "ranking", done, total });
      },
    );
    if (!this.current(generation)) return { kind: "failed" };
    this.check = check;
    this.view?.progress({ phase: "done", entries: entries.length });
    const states: CheckStates = Object.fromEntries(
      CHECK_NAMES.map((name) => [name, check.checks[name] ? "pass" : "fail"]),
    ) as CheckStates;
    if (beaconCheck) states.beacon = beaconCheck.ok ? "pass" : "fail";
    this.view?.checks(states);
    const failed = PAGE_CHECK_NAMES.filter((name) => states[name] === "fail");
    this.view?.verdict({
      pass: failed.length === 0,
      failed,
      ...(beaconCheck && !beaconCheck.ok ? { beaconProblem: beaconCheck.problem } : {}),
      firstMismatch: check.firstMismatch,
      first: check.order.slice(0, 10),
    });
    return { kind: "drawn", membership: { drawn: check.order, listed: entries } };
  }

  /** The fan's place in the draw, from their fan id (hashed in the browser, sent nowhere). */
  async findPlace(fanId: string): Promise<PlaceResult> {
    const asked = ++this.placeAsked;
    const answer = (r: PlaceResult) => {
      if (asked === this.placeAsked) this.view?.place(r);
      return r;
    };
    if (fanId.length === 0) return answer({ kind: "invalid" });
    if (!this.digestAvailable()) return answer({ kind: "unavailable" });
    const entry = await entryOf(fanId);
    let source = this.loaded;
    let settled = false;
    const first = source.then((l) => {
      settled = true;
      return l;
    });
    // One turn for an already-settled load to answer before saying "wait".
    await Promise.resolve();
    if (!settled) answer({ kind: "waiting", entry });
    let outcome = await first;
    // A Try again meanwhile: its load is the one that answers.
    while (outcome.kind === "failed" && source !== this.loaded) {
      source = this.loaded;
      outcome = await source;
    }
    if (outcome.kind === "failed") return answer({ kind: "unavailable" });
    if (outcome.kind === "not-drawn") return answer({ kind: "not-drawn", entry });
    const position = outcome.membership.drawn.indexOf(entry) + 1;
    if (position === 0) return answer({ kind: "absent", entry });
    return answer({
      kind: "found",
      entry,
      position,
      publishedPosition: outcome.membership.listed.indexOf(entry) + 1,
    });
  }
}
