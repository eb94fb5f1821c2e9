/** What every request handler can reach through `c.var`, and the app's type. */
import type { InviteVerifier } from "../waiting-room/invites.js";
import type { ProofOfWork } from "../waiting-room/proof-of-work.js";
import type { FanIdIssuer } from "../waiting-room/fan-ids.js";
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { OddsFigures } from "../waiting-room/odds.js";
import type { TtlCache } from "../ttl-cache.js";
import type { HoldService } from "../claims/hold-service.js";
import type { EventService } from "../events/event-service.js";
import type { EventDefinition, GeneralAdmissionCounts } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { Notifier } from "../notify/service.js";
import type { MetricsReporter } from "../metrics-reporter.js";
import type { PurchaseSaga } from "../purchases/saga.js";
import type { WebhookDeduplication } from "../purchases/webhook-dedup.js";
import type { SeatMapCache } from "../seatmap/cache.js";
import type { SectionPages } from "../seatmap/pages.js";
import type { SeatChangeRelay } from "../seatmap/relay.js";
import type { WaitingRoom } from "../waiting-room/index.js";
import type { ActionLog } from "../operators/action-log.js";
import type { VerifiedAccess } from "./middleware/fan-auth.js";
import type { EventStats } from "../stats/index.js";
import type { NamedOperatorToken, Operator } from "./middleware/admin-auth.js";
import type { RateLimiter } from "./middleware/rate-limit.js";
import type { RequestLog } from "./request-log.js";
import type { StreamSlots } from "./stream-slots.js";

import type { HealthDeps } from "../health.js";

export type { HealthDeps, HealthProbe } from "../health.js";

export interface GatewayLimits {
  /** Requests per second per client IP on join, status and holds; 0 turns it off. */
  ratePerIp: number;
  /** Requests per second per fan on status polls and holds; 0 turns it off. */
  ratePerFan: number;
  /** Operator requests per second per client IP. */
  ratePerOperatorIp: number;
  /**
   * The operator's load-test token (LOAD_TEST_TOKEN): a request carrying it in X-Load-Test-Token
   * skips the per-IP limit, never the per-fan one. Unset: nobody is exempt.
   */
  loadTestToken?: string;
  /** Take the client IP from X-Forwarded-For. */
  trustProxy: boolean;
  /** Request bodies larger than this are refused with 413. */
  maxBodyBytes: number;
  /** Open seat-map streams in this process (SSE_MAX_STREAMS); past it 503. */
  maxStreams: number;
  /** Open seat-map streams per client IP (SSE_MAX_STREAMS_PER_IP); past it 429. */
  maxStreamsPerIp: number;
  /** Bytes a stream may queue unwritten (SSE_MAX_BACKLOG_BYTES); past it the client is resynced. */
  streamBacklogBytes: number;
  /** A stream write not done within this ends the connection (SSE_WRITE_TIMEOUT_MS). */
  streamWriteTimeoutMs: number;
}

/**
 * The services every handler reaches through `c.get("deps")`, built once by src/services.ts. Only
 * services: no store client, no forwarder to one (the inventory is the services' to use).
 */
export interface AppDeps {
  logger: Logger;
  metrics: Metrics;
  health: HealthDeps;
  limits: GatewayLimits;
  /** ADMIN_TOKEN: the operator token named "default" (role admin). */
  adminToken: string;
  /** /metrics asks for this bearer token when set (METRICS_TOKEN). */
  metricsToken?: string;
  /** Which process exports the event-wide gauges (src/metrics-reporter.ts). */
  metricsReporter: MetricsReporter;
  /** Background jobs by queue and state, read from Redis at scrape time; absent without queues. */
  queueJobCounts?: () => Promise<Record<string, Record<string, number>>>;
  /** ADMIN_TOKENS: more operator tokens, each with a name and a role. */
  operatorTokens?: readonly NamedOperatorToken[];
  /** The log of operator actions (DynamoDB). */
  actionLog: ActionLog;
  waitingRoom: WaitingRoom;
  /** Keeping bots out of the line: proof-of-work challenges and the operator's invite tokens. */
  bots: { pow: ProofOfWork; invites: InviteVerifier; fanIds: FanIdIssuer };
  seatMap: SeatMapCache;
  relay: SeatChangeRelay;
  /** Section seat maps kept in this process's memory, serialized and compressed once per version. */
  sectionPages: SectionPages;
  /** This process's caps on open seat-map streams. */
  streams: StreamSlots;
  /** Setting up an event, and what is known of one (its cached definition, its counts). */
  events: EventService;
  holds: HoldService;
  /** "Tell me when seats come back" (src/notify/); `enabled` false without NOTIFY_WEBHOOK_URL. */
  notify: Notifier;
  rateLimiter: RateLimiter;
  purchases: PurchaseSaga;
  /** The operator's counts (shared snapshots) and the history the console charts (src/stats/). */
  stats: EventStats;
  webhooks: WebhookDeduplication & {
    /** Secrets the provider signs with (several during a rotation). */
    secret: string | readonly string[];
  };
}

/** Reads that may be a few seconds stale (built once by buildApp). */
export interface CachedReads {
  event(eventId: string): Promise<EventDefinition | null>;
  /** Keyed `<eventId>/<areaId>`. */
  generalAdmission(key: string): Promise<GeneralAdmissionCounts | null>;
  /** Events this process has served, for the per-event gauges of /metrics. */
  seenEvents: Set<string>;
  /** What the odds of a seat are computed from (src/waiting-room/odds.ts), kept 2 s; null: unknown event. */
  oddsFigures: TtlCache<OddsFigures | null>;
}

export type AppEnv = {
  Variables: {
    requestId: string;
    /** The request's logger (a child with the request id, made on first use). */
    log: RequestLog;
    deps: AppDeps;
    reads: CachedReads;
    /** Set on operator routes: whose token the request carried. */
    operator?: Operator;
    /**
     * Set on fan routes that check the access token before the request is validated
     * (src/http/middleware/fan-auth.ts accessTokenFirst): the verified claims, for the handler.
     */
    accessToken?: VerifiedAccess;
  };
};

export type App = OpenAPIHono<AppEnv>;
