/**
 * Fans, as the chaos scenarios run them: through the real HTTP queue (join, poll the status until
 * admitted, take the access token), then concurrently, each on its own: pick seats, hold, pay
 * with an Idempotency-Key, and react to each answer the way a well-behaved client would (a 503 or
 * no answer: wait, as Retry-After says, and retry the same request with the same key; a 409: pick
 * other seats; a decline: release the hold and try again). Every hold and purchase answer is kept
 * in a ledger, so a scenario can compare what fans were told with what the store holds.
 */
import { purchaseIdOf } from "../../../src/purchases/saga.js";
import { sleep } from "./cluster.js";
import type { Answer, Traffic } from "./traffic.js";

export interface Fan {
  fanId: string;
  queueToken: string;
  accessToken: string;
}

function retryAfterMs(answer: Answer, fallbackMs = 500): number {
  const header = Number(answer.headers.get("retry-after"));
  const base = Number.isFinite(header) && header > 0 ? header * 1000 : fallbackMs;
  // Jitter, as a client should, so that a crowd does not come back in one instant.
  return base * (0.5 + Math.random() * 0.5);
}

/** A purchase's 503 that names its purchase: the provider failed and nothing was charged (this key is spent). */
function providerFailed(answer: Answer): boolean {
  const body = answer.body as { error?: { details?: { purchaseId?: string } } } | null;
  return typeof body?.error?.details?.purchaseId === "string";
}

function errorCode(answer: Answer): string | undefined {
  const body = answer.body as { error?: { code?: string } } | null;
  return body?.error?.code;
}

/**
 * Joins every fan (retrying 503s as Retry-After says), then polls each one's status until it is
 * admitted, all at once. Throws if some are not admitted within `timeoutMs`.
 */
export async function admitFans(
  traffic: Traffic,
  eventId: string,
  fanIds: readonly string[],
  options: { timeoutMs?: number } = {},
): Promise<Fan[]> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  return Promise.all(
    fanIds.map(async (fanId) => {
      let queueToken: string | undefined;
      while (!queueToken) {
        const res = await traffic.request(`/v1/events/${eventId}/queue`, {
          method: "POST",
          json: { fanId },
          kind: "join",
        });
        if (res.status === 201 || res.status === 200) queueToken = (res.body as { queueToken: string }).queueToken;
        else if (Date.now() > deadline) throw new Error(`join ${fanId}: ${res.status} ${JSON.stringify(res.body)}`);
        else await sleep(retryAfterMs(res, 200));
      }
      return { fanId, queueToken, accessToken: await pollUntilAdmitted(traffic, eventId, queueToken, deadline) };
    }),
  );
}

/** Polls the queue status with `queueToken` until it gives an access token. */
export async function pollUntilAdmitted(
  traffic: Traffic,
  eventId: string,
  queueToken: string,
  deadline: number,
): Promise<string> {
  for (;;) {
    const res = await traffic.request(`/v1/events/${eventId}/queue/status`, { token: queueToken, kind: "status" });
    const body = res.body as { status?: string; accessToken?: string; pollAfterSeconds?: number } | null;
    if (res.status === 200 && body?.accessToken) return body.accessToken;
    if (Date.now() > deadline) throw new Error(`not admitted: ${res.status} ${JSON.stringify(res.body)}`);
    await sleep(res.status === 200 ? Math.min(300, (body?.pollAfterSeconds ?? 0.3) * 1000) : retryAfterMs(res, 200));
  }
}

export interface HoldAttempt {
  fanId: string;
  seats: string[];
  status: number;
  code?: string;
  holdId?: string;
  startedAt: number;
  endedAt: number;
}

export type PurchaseEnd =
  | "confirmed"
  | "pending"
  | "declined"
  | "hold_expired"
  | "unavailable"
  /** 503 from the payment provider: nothing charged, the purchase failed; a new key may try again. */
  | "provider_error"
  | "no_answer"
  | "other";

export interface PurchaseAttempt {
  fanId: string;
  holdId: string;
  seats: string[];
  key: string;
  token: string;
  /** Derived from the key exactly as the gateway does, so it is known even when no answer came. */
  purchaseId: string;
  answers: Array<{ status: number; code?: string; startedAt: number; endedAt: number }>;
  /** How it ended from the fan's point of view. */
  end: PurchaseEnd;
  /** The status GET /v1/purchases/{id} gave when the fan polled it (after no answer). */
  polled?: string;
}

export interface SaleLedger {
  holds: HoldAttempt[];
  purchases: PurchaseAttempt[];
  releases: number;
}

export interface SaleOptions {
  eventId: string;
  fans: readonly Fan[];
  /** The seats fans choose from. */
  seats: readonly string[];
  /** Seats per hold, chosen uniformly in [min, max] (default [1, 2]). */
  seatsPerHold?: [number, number];
  /** The payment token of a purchase (default tok_ok). */
  paymentToken?: (fan: Fan, attempt: number) => string;
  /** Whether the fan pays for this hold or walks away from it (and stops) (default: pays). */
  pays?: (fan: Fan) => boolean;
  /** No new hold is tried after this long. */
  durationMs: number;
  /** A purchase still being retried gives up this long after the sale's end (default 20 s). */
  graceMs?: number;
  /** Pause between a fan's actions (default [50, 250] ms). */
  thinkMs?: [number, number];
  /** When each fan starts, after the sale's start (default [0, 0] ms): a crowd arriving over time. */
  arrivalMs?: [number, number];
  /** Time a fan takes to pay once the hold is granted (default [0, 0] ms). */
  payDelayMs?: [number, number];
  /** Purchases wait while it is closed (a scenario pausing payments for a moment). */
  purchaseGate?: Gate;
  /** Fans stop after a purchase that confirmed or is pending (default true). */
  buyOnce?: boolean;
  /**
   * What a fan does when a purchase got no HTTP answer (its gateway died): "retry" it with the same
   * key, or "poll" GET /v1/purchases/{id} until it is no longer pending (default retry).
   */
  onNoAnswer?: "retry" | "poll";
}

export interface Sale {
  ledger: SaleLedger;
  /** Fans stop starting new holds (purchases under way finish). */
  stop(): void;
  done: Promise<SaleLedger>;
}

/** Purchase answers that end the attempt; 503 and no answer are retried with the same key. */
const FINAL_ANSWERS: Record<number, PurchaseEnd> = {
  201: "confirmed",
  202: "pending",
  402: "declined",
  409: "hold_expired",
};
const POLLED_ENDS: Record<string, PurchaseEnd> = {
  confirmed: "confirmed",
  refunded: "hold_expired",
  failed: "declined",
};

const between = ([lo, hi]: [number, number]) => lo + Math.floor(Math.random() * (hi - lo + 1));

export function startSale(traffic: Traffic, options: SaleOptions): Sale {
  const ledger: SaleLedger = { holds: [], purchases: [], releases: 0 };
  const started = Date.now();
  const end = started + options.durationMs;
  const giveUp = end + (options.graceMs ?? 20_000);
  let stopped = false;
  const taken = new Set<string>();
  const think = () => sleep(between(options.thinkMs ?? [50, 250]));
  const selling = () => !stopped && Date.now() < end;
  const { eventId } = options;

  const pick = (n: number): string[] => {
    const free = options.seats.filter((s) => !taken.has(s));
    const out: string[] = [];
    while (out.length < n && free.length > 0) out.push(free.splice(Math.floor(Math.random() * free.length), 1)[0]!);
    return out;
  };

  async function buy(fan: Fan, hold: HoldAttempt, n: number): Promise<PurchaseEnd> {
    const key = `${fan.fanId}-k${n}`;
    const token = options.paymentToken?.(fan, n) ?? "tok_ok";
    const attempt: PurchaseAttempt = {
      fanId: fan.fanId,
      holdId: hold.holdId!,
      seats: hold.seats,
      key,
      token,
      purchaseId: purchaseIdOf(eventId, fan.fanId, key),
      answers: [],
      end: "other",
    };
    ledger.purchases.push(attempt);
    for (;;) {
      const gate = options.purchaseGate;
      if (gate) await gate.enter();
      const res = await traffic
        .request(`/v1/events/${eventId}/holds/${hold.holdId}/purchase`, {
          method: "POST",
          token: fan.accessToken,
          headers: { "idempotency-key": key },
          json: { paymentToken: token },
          kind: "purchase",
        })
        .finally(() => gate?.leave());
      const code = errorCode(res);
      attempt.answers.push({
        status: res.status,
        ...(code ? { code } : {}),
        startedAt: res.startedAt,
        endedAt: res.endedAt,
      });
      const final = FINAL_ANSWERS[res.status];
      if (final) {
        attempt.end = final;
        return final;
      }
      if (res.status === 0 && options.onNoAnswer === "poll") {
        attempt.polled = await pollPurchase(fan, attempt.purchaseId);
        attempt.end = POLLED_ENDS[attempt.polled] ?? "no_answer";
        return attempt.end;
      }
      if (res.status !== 503 && res.status !== 0) {
        attempt.end = "other";
        return attempt.end;
      }
      if (res.status === 503 && providerFailed(res)) {
        attempt.end = "provider_error";
        return attempt.end;
      }
      attempt.end = res.status === 503 ? "unavailable" : "no_answer";
      if (Date.now() > giveUp) return attempt.end;
      await sleep(retryAfterMs(res));
    }
  }

  async function pollPurchase(fan: Fan, purchaseId: string): Promise<string> {
    let last = "unknown";
    while (Date.now() < giveUp + 60_000) {
      const res = await traffic.request(`/v1/purchases/${purchaseId}`, {
        token: fan.accessToken,
        kind: "purchase-get",
      });
      if (res.status === 200) {
        last = (res.body as { status: string }).status;
        if (last !== "pending") return last;
      } else if (res.status === 404) {
        last = "not_found";
      }
      await sleep(500);
    }
    return last;
  }

  async function runFan(fan: Fan): Promise<void> {
    let purchases = 0;
    if (options.arrivalMs) await sleep(between(options.arrivalMs));
    while (selling()) {
      const seats = pick(between(options.seatsPerHold ?? [1, 2]));
      if (seats.length === 0) return;
      for (const s of seats) taken.add(s);
      const res = await traffic.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: fan.accessToken,
        json: { seats },
        kind: "hold",
      });
      const code = errorCode(res);
      const attempt: HoldAttempt = {
        fanId: fan.fanId,
        seats,
        status: res.status,
        ...(code ? { code } : {}),
        startedAt: res.startedAt,
        endedAt: res.endedAt,
      };
      ledger.holds.push(attempt);
      if (res.status === 201) {
        attempt.holdId = (res.body as { holdId: string }).holdId;
        if (options.pays && !options.pays(fan)) return;
        if (options.payDelayMs) await sleep(between(options.payDelayMs));
        let ended = await buy(fan, attempt, purchases++);
        // Nothing was charged under that key: a new key, the same hold, after the Retry-After.
        for (let tries = 0; ended === "provider_error" && tries < 20 && Date.now() < giveUp; tries++) {
          await sleep(retryAfterMs({ headers: new Headers({ "retry-after": "1" }) } as Answer));
          ended = await buy(fan, attempt, purchases++);
        }
        if ((ended === "confirmed" || ended === "pending") && (options.buyOnce ?? true)) return;
        if (ended === "declined" || ended === "unavailable" || ended === "provider_error" || ended === "no_answer") {
          // Give the seats back for others (best effort; the hold expires anyway).
          const released = await traffic.request(`/v1/events/${eventId}/holds/${attempt.holdId}`, {
            method: "DELETE",
            token: fan.accessToken,
            kind: "release",
          });
          if (released.status === 204) ledger.releases++;
        }
      } else if (res.status === 409) {
        // Lost to someone else: those seats stay off this crowd's list.
      } else {
        // Nothing held (or unknown): the seats go back on the list for anyone.
        for (const s of seats) taken.delete(s);
        if (res.status === 422 || res.status === 400 || res.status === 404) return;
        if (res.status === 503 || res.status === 0 || res.status === 429) await sleep(retryAfterMs(res));
      }
      await think();
    }
  }

  const done = Promise.all(options.fans.map((f) => runFan(f))).then(() => ledger);
  return {
    ledger,
    stop: () => {
      stopped = true;
    },
    done,
  };
}

/**
 * A gate the fans' purchases pass through: closed, new purchases wait; `drained()` resolves once
 * no purchase request is in flight. For a scenario that must know no charge is being made.
 */
export class Gate {
  private inFlight = 0;
  private opened: Promise<void> = Promise.resolve();
  private release: (() => void) | undefined;
  private idle: Array<() => void> = [];

  close(): void {
    if (this.release) return;
    this.opened = new Promise((resolve) => {
      this.release = resolve;
    });
  }

  open(): void {
    this.release?.();
    this.release = undefined;
  }

  async enter(): Promise<void> {
    for (;;) {
      await this.opened;
      if (!this.release) break;
    }
    this.inFlight++;
  }

  leave(): void {
    this.inFlight--;
    if (this.inFlight === 0) for (const done of this.idle.splice(0)) done();
  }

  /** Resolves when no purchase is in flight (call after close()). */
  drained(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }
}

/** Seat ids `<section>-<row>-<seat>` of a section laid out as rows x seatsPerRow. */
export function seatIds(section: { id: string; rows: number; seatsPerRow: number }): string[] {
  const out: string[] = [];
  for (let r = 1; r <= section.rows; r++)
    for (let s = 1; s <= section.seatsPerRow; s++) out.push(`${section.id}-${r}-${s}`);
  return out;
}
