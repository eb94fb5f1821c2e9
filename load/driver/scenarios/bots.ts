/**
 * bots: beside honest fans (spread over the first half of DURATION), RATE bot requests a second
 * for DURATION seconds: clients that skip the queue, use a queue token as an access token, forge
 * or tamper tokens, call operator endpoints, hammer purchase. What must hold: every bot request
 * refused (401/403/404), none accepted. k6: load/k6/bots.ts.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { floorOf, type FanRun, type Scenario, seatsFor } from "../scenario.js";

/** The answers a bot must get. */
const REFUSED = [401, 403, 404];

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
  const j = await run.client.call<{ queueToken: string }>("bot: join", "POST", `/v1/events/${run.eventId}/queue`, {
    json: { fanId: `bot-${k}` },
    ok: [200, 201],
  });
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

/** The k-th bot's requests: one of six kinds, in turn. */
async function botRequests(run: FanRun, k: number): Promise<BotRequest[]> {
  const ev = `/v1/events/${run.eventId}`;
  const hold = { method: "POST", path: `${ev}/holds`, json: { seats: [`${run.sections[0]?.id ?? "A"}-1-1`] } };
  const kind = k % 6;
  // skips the queue: no token at all (and never joins)
  if (kind === 0) return [{ endpoint: "bot: hold, no token", ...hold }];
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
  }
}

export const bots: Scenario = {
  defaults: { fans: 200, rate: 100, duration: 20 },
  // The honest fans arrive over the first half of the run, the bots all through it.
  arrivals: (o) => ({ fans: o.fans, perSecond: Math.max(1, o.fans / Math.max(1, o.duration / 2)) }),
  setup: (o, fans) => ({ sections: floorOf(seatsFor(o, fans)), holdSeconds: 120 }),
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
    progress: (t) => `  bot requests ${t.botRequests} accepted ${t.botAccepted}`,
    lines: (t) => [`bot requests ${t.botRequests}, accepted ${t.botAccepted} (must be 0)`],
  },
  thresholds: ["bot_requests_accepted<1"],
};
