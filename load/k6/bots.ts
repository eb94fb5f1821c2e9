/**
 * bots: clients that skip the queue, replay or forge tokens, hammer endpoints, and join without
 * the proof of work the event asks (POW_BITS, default 10: honest fans and the bots that want a
 * real queue token solve it; pow_solve_ms is what it cost k6), beside a few honest fans. Every bot
 * request must be refused (400/401/403/404/428); one accepted fails the run.
 *   k6 run -e BASE_URL=... -e ADMIN_TOKEN=... -e FANS=200 -e RATE=50 -e DURATION=30 [-e POW_BITS=10] load/k6/bots.ts
 */
import encoding from "k6/encoding";
import http from "k6/http";
import type { Options } from "k6/options";
import {
  BASE_URL,
  botAccepted,
  botRefused,
  counted,
  DURATION,
  FANS,
  POW_BITS,
  fanJourney,
  join,
  RATE,
  runHeaders,
  type Setup,
  setupEvent,
  status,
  summary,
  tagsFor,
  withRunReport,
} from "./lib.ts";
import { ROUTES, type RouteName } from "../routes.ts";

export const options: Options = withRunReport({
  scenarios: {
    // Exactly FANS honest fans, spread evenly over DURATION (a rate of FANS per DURATION).
    fans: {
      executor: "constant-arrival-rate",
      exec: "fans",
      rate: FANS,
      timeUnit: `${DURATION}s`,
      duration: `${DURATION}s`,
      preAllocatedVUs: Math.min(FANS, 500),
      maxVUs: FANS,
      gracefulStop: "300s",
    },
    bots: {
      executor: "constant-arrival-rate",
      exec: "bots",
      rate: RATE,
      timeUnit: "1s",
      duration: `${DURATION}s`,
      preAllocatedVUs: 50,
      maxVUs: 500,
    },
  },
  thresholds: {
    bot_requests_accepted: ["count<1"],
    bot_requests_refused: ["rate==1"],
    sales_confirmed: ["count>0"],
  },
});

export function setup(): Setup {
  return setupEvent(
    {
      sections: [{ id: "A", tier: "Floor", price: 15000, rows: Math.max(1, Math.ceil(FANS / 25)), seatsPerRow: 50 }],
    },
    5,
    // The join asks a proof of work: honest fans (lib.ts join) pay it, bots that skip it are refused.
    { powBits: __ENV.POW_BITS === undefined ? 10 : POW_BITS },
  );
}

export function fans(data: Setup): void {
  fanJourney(data);
}

/** A token with the right shape and a wrong signature, or a real one with its claims changed. */
function forge(real?: string): string {
  if (real && Math.random() < 0.5) {
    const [h, , s] = real.split(".");
    const claims = encoding.b64encode(JSON.stringify({ fanId: "bot", kind: "access", exp: 4102444800 }), "rawurl");
    return `${h}.${claims}.${s}`;
  }
  const header = encoding.b64encode(JSON.stringify({ alg: "HS256", typ: "JWT" }), "rawurl");
  const claims = encoding.b64encode(JSON.stringify({ sub: "bot", kind: "access", exp: 4102444800 }), "rawurl");
  return `${header}.${claims}.${encoding.b64encode("not-a-signature", "rawurl")}`;
}

/**
 * Counts a bot's answer: refused, or accepted. No answer at all (status 0: k6 gave up, or the
 * connection failed) is neither: it is counted in client_timeouts or http_req_failed, never as a
 * bot let in, which a generator out of CPU would otherwise report as the gateway's breach.
 */
function refused(res: { status: number; error_code: number }): void {
  counted(res, "bot");
  const { status } = res;
  if (status === 0) return;
  const ok = status === 400 || status === 401 || status === 403 || status === 404 || status === 428 || status === 429;
  botRefused.add(ok);
  if (!ok) botAccepted.add(1);
}

export function bots(data: Setup): void {
  const base = `${BASE_URL}/v1/events/${data.eventId}`;
  const body = JSON.stringify({ seats: ["A-1-1", "A-1-2"] });
  // Named by route, so a made-up hold id per request is not a metric series of its own.
  const opt = (token: string | undefined, route: RouteName) => ({
    headers: {
      "content-type": "application/json",
      ...runHeaders(),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    tags: tagsFor("bot", route),
    responseCallback: http.expectedStatuses(401, 403, 404, 429),
  });
  // A real queue token (the bot did join), used where an access token is needed.
  const joined = join(data.eventId, `bot-${Math.random().toString(36).slice(2)}`);
  const queueToken = joined?.queueToken;
  const joinOpt = { ...opt(undefined, ROUTES.join), responseCallback: http.expectedStatuses(400, 428, 429) };
  switch (Math.floor(Math.random() * 8)) {
    case 6: // join without paying the proof of work
      refused(http.post(`${base}/queue`, JSON.stringify({ fanId: `bot-np-${Math.random()}` }), joinOpt));
      break;
    case 7: {
      // join with a made-up proof
      const fanId = `bot-fp-${Math.random().toString(36).slice(2)}`;
      const forged = `pow1.${data.eventId}.${encoding.b64encode(fanId, "rawurl")}.0.4102444800000.forged`;
      refused(http.post(`${base}/queue`, JSON.stringify({ fanId, pow: { challenge: forged, nonce: "0" } }), joinOpt));
      break;
    }
    case 0: // skip the queue: hold without any token
      refused(http.post(`${base}/holds`, body, opt(undefined, ROUTES.hold)));
      break;
    case 1: // a queue token where an access token is needed
      refused(http.post(`${base}/holds`, body, opt(queueToken, ROUTES.hold)));
      break;
    case 2: // forged access token
      refused(http.post(`${base}/holds`, body, opt(forge(queueToken), ROUTES.hold)));
      break;
    case 3: // forged queue token on the status poll
      refused(http.get(`${base}/queue/status`, opt(forge(), ROUTES.status)));
      break;
    case 4: // operator endpoints with a fan's token
      refused(http.get(`${BASE_URL}/v1/admin/events/${data.eventId}/stats`, opt(queueToken, ROUTES.eventStats)));
      break;
    default: // purchase of somebody's hold with a forged token, hammered
      for (let i = 0; i < 5; i++) {
        const o = opt(forge(queueToken), ROUTES.purchase);
        refused(
          http.post(`${base}/holds/h_bogus${i}/purchase`, JSON.stringify({ paymentToken: "tok_ok" }), {
            ...o,
            headers: { ...o.headers, "idempotency-key": `bot-${i}` },
          }),
        );
      }
  }
  // A bot that polls with its real queue token is fine: that is what the line is for.
  if (queueToken) status(data.eventId, queueToken);
}

export default fans;

export const handleSummary = summary("bots");
