/**
 * A fan's journey through the on-sale, as the fan page walks it: join the line, poll the status
 * at the interval the gateway suggests until admitted, look at the seat map, hold one or two
 * seats (again after a 409, without the seats it lost), think, then buy. A scenario changes only
 * what its `FanBehaviour` (scenario.ts) says: when a fan leaves the line, where it looks, which
 * seats it asks for, what it does with its hold.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { solveChallenge, workOf } from "../../src/waiting-room/proof-of-work.js";
import { pollDelaySeconds } from "../poll.js";
import type { AfterHold, BestAsk, FanBehaviour, FanRun } from "./scenario.js";

type Joined = { queueToken: string; status: string };

/**
 * Joins as the fan page does: when the line asks a proof of work (428), fetches a challenge,
 * solves it (counted in the tally: joins, hashes, ms) and joins with it.
 */
/** How often a join refused 429 is tried again. */
const JOIN_RETRIES_AFTER_429 = 5;

export async function joinLine(run: FanRun, fanId: string, endpoint = "join") {
  const { client, figures } = run;
  const ev = `/v1/events/${run.eventId}`;
  const body = { fanId };
  let first = await client.call<Joined>(endpoint, "POST", `${ev}/queue`, { json: body, ok: [200, 201, 428] });
  // Limited (429: still counted as an unexpected answer): tried again a few times after a second
  // or two, as the fan page does, rather than the fan silently dropped from the run.
  for (let tries = 0; first.status === 429 && tries < JOIN_RETRIES_AFTER_429; tries++) {
    await sleep(1_000 + Math.random() * 1_000);
    first = await client.call<Joined>(endpoint, "POST", `${ev}/queue`, { json: body, ok: [200, 201, 428] });
  }
  if (first.status !== 428) return first;
  const issued = await client.call<{ challenge: string; bits: number }>(
    "challenge",
    "GET",
    `${ev}/queue/challenge?fanId=${encodeURIComponent(fanId)}`,
  );
  if (issued.status !== 200) return first;
  const { challenge, bits } = issued.body;
  const started = performance.now();
  const nonce = solveChallenge(challenge, bits);
  figures.tally.powSolveMs += performance.now() - started;
  figures.tally.powSolved++;
  // base-36 nonces from 0: the nonce's value is the hashes tried, less one
  figures.tally.powHashes += Number.parseInt(nonce, 36) + 1;
  if (workOf(challenge, nonce) < bits) throw new Error("solveChallenge returned a nonce short of the work");
  return client.call<Joined>(endpoint, "POST", `${ev}/queue`, {
    json: { ...body, pow: { challenge, nonce } },
    ok: [200, 201],
  });
}

interface Held {
  holdId: string;
  seats: string[];
}

/** `want` seats picked at random among `available` (fewer when the same one comes up twice). */
export function randomSeats(available: readonly string[], want: number): string[] {
  return Array.from(
    new Set(Array.from({ length: want }, () => available[Math.floor(Math.random() * available.length)]!)),
  );
}

/** The i-th fan's whole journey. */
export async function fanJourney(run: FanRun, i: number, behaviour: FanBehaviour): Promise<void> {
  const access = await waitForAdmission(run, i, behaviour);
  if (!access || behaviour.shops?.(i) === false) return;
  const held = await holdSeats(run, i, access, behaviour);
  if (!held) return;
  await sleep(run.thinkMs ?? 300 + Math.random() * 500);
  await settle(run, access, held, behaviour.afterHold?.(i) ?? "buy");
}

/** Joins and polls until admitted: the access token, or undefined when the fan left or was let go. */
async function waitForAdmission(run: FanRun, i: number, behaviour: FanBehaviour): Promise<string | undefined> {
  const { client, figures } = run;
  const ev = `/v1/events/${run.eventId}`;
  const joined = await joinLine(run, `fan-${i}`);
  if (joined.status !== 200 && joined.status !== 201) return undefined;
  if (joined.body.status === "prequeue") figures.tally.prequeued++;
  const leavesAfter = behaviour.leavesAfterMs?.(i);
  const leaveAt = leavesAfter === undefined ? undefined : Date.now() + leavesAfter;
  while (Date.now() <= run.hardStop) {
    const askedAt = Date.now();
    const s = await client.call<{
      status: string;
      position: number;
      pollAfterSeconds?: number;
      pollAfterMs?: number;
      accessToken?: string;
      admittedAt?: string;
    }>("status", "GET", `${ev}/queue/status`, { token: joined.body.queueToken });
    if (s.status === 200 && s.body.accessToken) {
      const decidedAt = s.body.admittedAt ? Date.parse(s.body.admittedAt) : undefined;
      figures.admitted(
        s.body.position,
        decidedAt === undefined ? undefined : Date.now() - decidedAt,
        decidedAt === undefined ? undefined : askedAt - decidedAt,
        decidedAt,
      );
      return s.body.accessToken;
    }
    if (s.status === 200 && s.body.status !== "waiting" && s.body.status !== "prequeue") return undefined;
    if (leaveAt !== undefined && Date.now() > leaveAt) {
      figures.tally.abandonedWaiting++;
      return undefined;
    }
    const scheduled = run.coarsePolls ? undefined : s.body?.pollAfterMs;
    await sleep(pollDelaySeconds(s.body?.pollAfterSeconds, Math.random(), run.maxPollSeconds, scheduled) * 1000);
  }
  return undefined;
}

/** The seats of the first section in `order` the (cached) map shows available, less those lost. */
async function availableSeats(run: FanRun, order: readonly string[], lost: ReadonlySet<string>): Promise<string[]> {
  let available: string[] = [];
  for (const sectionId of order) {
    // The compact form: [row, firstSeat, count] runs, one status character a seat.
    const page = await run.client.call<{ layout: [number, number, number][]; status: string }>(
      "section seats",
      "GET",
      `/v1/events/${run.eventId}/sections/${sectionId}/seats?format=compact`,
    );
    available = [];
    let at = 0;
    for (const [row, first, count] of page.body?.layout ?? []) {
      for (let k = 0; k < count; k++, at++) {
        const id = `${sectionId}-${row}-${first + k}`;
        if (page.body?.status[at] === "a" && !lost.has(id)) available.push(id);
      }
    }
    if (available.length > 0) break;
  }
  return available;
}

/**
 * Up to four tries at a best-available hold; undefined when nothing together is left (409
 * `no_block_available` with `available: 0`) or out of time. Any other 409 was contention.
 */
async function holdBest(run: FanRun, access: string, best: BestAsk): Promise<Held | undefined> {
  for (let attempt = 0; attempt < 4; attempt++) {
    if (Date.now() > run.hardStop) return undefined;
    const h = await run.client.call<Held & { error?: { details?: { available?: number } } }>(
      "hold",
      "POST",
      `/v1/events/${run.eventId}/holds`,
      { token: access, json: { best }, ok: [201, 409] },
    );
    if (h.status === 201) {
      run.figures.tally.holds++;
      return h.body;
    }
    if (h.status !== 409) {
      await sleep(200);
      continue;
    }
    run.figures.tally.conflicts++;
    if (h.body?.error?.details?.available === 0) return undefined;
    await sleep(50 + Math.random() * 200);
  }
  return undefined;
}

/** Up to eight tries at a hold of 1-2 seats; undefined when sold out or out of time. */
async function holdSeats(run: FanRun, i: number, access: string, behaviour: FanBehaviour): Promise<Held | undefined> {
  const best = behaviour.best?.(i);
  if (best) return holdBest(run, access, best);
  const want = 1 + (i % 2);
  /** Seats this fan saw go to someone else (the cached map may still show them available). */
  const lost = new Set<string>();
  for (let attempt = 0; attempt < 8; attempt++) {
    if (Date.now() > run.hardStop) return undefined;
    const order =
      behaviour.sectionOrder?.(run.sections, attempt) ?? run.sections.map((s) => s.id).sort(() => Math.random() - 0.5);
    const available = await availableSeats(run, order, lost);
    if (available.length === 0) return undefined; // sold out (as far as the cached map knows)
    const chosen = behaviour.choose?.(available, want, attempt) ?? randomSeats(available, want);
    const h = await run.client.call<Held & { error?: { details?: { seats?: string[] } } }>(
      "hold",
      "POST",
      `/v1/events/${run.eventId}/holds`,
      { token: access, json: { seats: chosen }, ok: [201, 409] },
    );
    if (h.status === 201) {
      run.figures.tally.holds++;
      return h.body;
    }
    if (h.status === 409) {
      run.figures.tally.conflicts++;
      for (const s of h.body?.error?.details?.seats ?? chosen) lost.add(s);
      await sleep(50 + Math.random() * 200);
    } else await sleep(200);
  }
  return undefined;
}

/** Buys the hold, releases it, or walks away from it (it expires and its seats return to sale). */
async function settle(run: FanRun, access: string, held: Held, after: AfterHold): Promise<void> {
  const { client, figures } = run;
  const hold = `/v1/events/${run.eventId}/holds/${held.holdId}`;
  if (after === "release") {
    const r = await client.call("release", "DELETE", hold, { token: access, ok: [204] });
    if (r.status === 204) {
      figures.tally.released++;
      figures.returnedToSale(held.seats);
    }
    return;
  }
  if (after === "lapse") {
    figures.tally.lapsed++;
    figures.returnedToSale(held.seats);
    return;
  }
  const p = await client.call<{ status: string; seats?: string[] }>("purchase", "POST", `${hold}/purchase`, {
    token: access,
    json: { paymentToken: "tok_ok" },
    headers: { "idempotency-key": `load-${held.holdId}` },
    // 409 hold_expired: the fan took longer than holdSeconds (a slow gateway); not a gateway error
    ok: [201, 202, 409],
  });
  if (p.status === 201 || p.status === 202) figures.purchased(p.body.seats ?? held.seats);
}
