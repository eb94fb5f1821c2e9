/**
 * bots: beside honest fans (spread over the first half of DURATION), RATE bot requests a second
 * for DURATION seconds: clients that skip the queue, use a queue token as an access token, forge
 * or tamper tokens, call operator endpoints, hammer purchase, join without a proof of work or
 * with a bad one. The event asks a proof of --pow-bits (default 10) for a new place: honest fans
 * (and the bots that want a real queue token) pay it, and the report gives its cost per join.
 * What must hold: every bot request refused (400/401/403/404/428), none accepted.
 * k6: load/k6/bots.ts.
 *
 * Invite tokens (the other half of issue 18 item 3) need the gateway's INVITE_SECRET; the
 * integration tests (test/gateway/bots.test.ts) cover them, this scenario does not.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { joinLine } from "../journey.js";
import { floorOf, type FanRun, type Scenario, seatsFor } from "../scenario.js";

/** The answers a bot must get. */
const REFUSED = [400, 401, 403, 404, 428];

const DEFAULT_POW_BITS = 10;

interface BotRequest {
  endpoint: string;
  method: string;
  path: string;
  token?: string;
  json?: unknown;
  headers?: Record<string, string>;
}

/** A real queue token, and two forgeries of it: claims changed under its signature, and re-signed. */
async function tokensOf(run: FanRun, k: number): Promise<{ queue: string; tampered: string; resigned: string }> {
  // This bot pays the proof of work: a real queue token, to misuse afterwards.
  const j = await joinLine(run, `bot-${k}`, "bot: join, solved");
  const queue = j.body?.queueToken ?? "x.y.z";
  const [h = "", payload = "", sig = ""] = queue.split(".");
  const claims = Buffer.from(JSON.stringify({ sub: `bot-${k}`, kind: "access", exp: 4102444800 })).toString(
    "base64url",
  );
  return {
    queue,
    tampered: `${h}.${claims}.${sig}`,
    resigned: `${h}.${payload}.${Buffer.from(`forged-${k}-signature-bytes-000`).toString("base64url")}`,
  };
}

/** The k-th bot's requests: one of eight kinds, in turn. */
async function botRequests(run: FanRun, k: number): Promise<BotRequest[]> {
  const ev = `/v1/events/${run.eventId}`;
  const hold = { method: "POST", path: `${ev}/holds`, json: { seats: [`${run.sections[0]?.id ?? "A"}-1-1`] } };
  const kind = k % 8;
  // skips the queue: no token at all (and never joins)
  if (kind === 0) return [{ endpoint: "bot: hold, no token", ...hold }];
  // joins without paying the proof of work (428), or with a made-up one (400)
  if (kind === 6)
    return [{ endpoint: "bot: join, no proof", method: "POST", path: `${ev}/queue`, json: { fanId: `bot-${k}` } }];
  if (kind === 7) {
    const forged = `pow1.${run.eventId}.${Buffer.from(`bot-${k}`).toString("base64url")}.0.4102444800000.forged`;
    return [
      {
        endpoint: "bot: join, forged proof",
        method: "POST",
        path: `${ev}/queue`,
        json: { fanId: `bot-${k}`, pow: { challenge: forged, nonce: "0" } },
      },
    ];
  }
  const t = await tokensOf(run, k);
  switch (kind) {
    case 1: // replays its queue token as an access token
      return [{ endpoint: "bot: hold, queue token", ...hold, token: t.queue }];
    case 2:
      return [{ endpoint: "bot: hold, forged token", ...hold, token: t.tampered }];
    case 3:
      return [{ endpoint: "bot: status, forged token", method: "GET", path: `${ev}/queue/status`, token: t.resigned }];
    case 4:
      return [
        {
          endpoint: "bot: admin, fan token",
          method: "GET",
          path: `/v1/admin/events/${run.eventId}/stats`,
          token: t.queue,
        },
      ];
    default:
      // hammers the purchase endpoint of a made-up hold
      return Array.from({ length: 5 }, (_, n) => ({
        endpoint: "bot: purchase, forged token",
        method: "POST",
        path: `${ev}/holds/h_bot${k}${n}/purchase`,
        token: t.tampered,
        json: { paymentToken: "tok_ok" },
        headers: { "idempotency-key": `bot-${k}-${n}` },
      }));
  }
}

async function bot(run: FanRun, k: number): Promise<void> {
  const { tally } = run.figures;
  for (const { endpoint, method, path, ...options } of await botRequests(run, k)) {
    const { status } = await run.client.call(endpoint, method, path, { ...options, ok: REFUSED });
    tally.botRequests++;
    if (status >= 200 && status < 300) tally.botAccepted++;
    if (endpoint.startsWith("bot: join,") && (status === 400 || status === 428)) tally.botJoinsRefused++;
  }
}

export const bots: Scenario = {
  defaults: { fans: 200, rate: 100, duration: 20 },
  // The honest fans arrive over the first half of the run, the bots all through it.
  arrivals: (o) => ({ fans: o.fans, perSecond: Math.max(1, o.fans / Math.max(1, o.duration / 2)) }),
  setup: (o, fans) => ({
    sections: floorOf(seatsFor(o, fans)),
    holdSeconds: 120,
    waitingRoom: { powBits: o.powBits ?? DEFAULT_POW_BITS },
  }),
  fan: {},
  beside: async (run, o) => {
    const end = Date.now() + o.duration * 1000;
    const started: Promise<void>[] = [];
    for (let k = 0; Date.now() < end; k++) {
      started.push(bot(run, k));
      await sleep(1000 / Math.max(1, o.rate));
    }
    await Promise.all(started);
  },
  report: {
    progress: (t) => `  bot requests ${t.botRequests} accepted ${t.botAccepted} joins refused ${t.botJoinsRefused}`,
    lines: (t) => [
      `bot requests ${t.botRequests}, accepted ${t.botAccepted} (must be 0)`,
      `bot joins refused for a missing or bad proof of work: ${t.botJoinsRefused}`,
      t.powSolved > 0
        ? `proof of work: ${t.powSolved} joins paid it, ${Math.round(t.powHashes / t.powSolved)} hashes and ${(t.powSolveMs / t.powSolved).toFixed(1)} ms each on average (the driver's CPU)`
        : "proof of work: off (no join was asked one)",
    ],
  },
  thresholds: ["bot_requests_accepted<1"],
};
