/** The API's bodies, as docs/API.md describes them (only the fields the pages read). */
export type FanStatus = "prequeue" | "waiting" | "admitted" | "abandoned" | "completed" | "expired" | "revoked";

export interface Joined {
  queueToken: string;
  /** The fan id the place is held under: issued by the gateway when the join named none. */
  fanId?: string;
  position: number;
  status: FanStatus;
  provisional?: boolean;
  ahead?: number;
  etaSeconds?: number | null;
  pollAfterSeconds?: number;
  pollAfterMs?: number;
  /** The draw's commitment as the fan joined: the page keeps it to check the seed against. */
  lottery?: { commitment: string };
}

export interface SeatOdds {
  chance: number;
  seatsLeft: number;
  fansAhead: number;
  seatsPerFan: number;
  /** conversion: from what admitted fans took so far; limit: too early, the worst case. */
  basis: "conversion" | "limit";
}

export interface QueueStatus {
  status: FanStatus;
  position: number;
  provisional?: boolean;
  ahead: number;
  etaSeconds: number | null;
  pollAfterSeconds: number;
  /** The poll scheduled on the fan's ETA (milliseconds): followed as given, no jitter. */
  pollAfterMs?: number;
  accessToken?: string;
  accessExpiresAt?: string;
  canRejoin?: boolean;
  /** An estimate of the chance of a seat at this place (waiting and pre-queued fans). */
  odds?: SeatOdds;
  /** Only when the line was lost and this poll placed the fan in the new one: use it from now on. */
  queueToken?: string;
}

export interface WaitingRoomInfo {
  onSaleAt: string;
  state: "prequeue" | "open" | "paused" | "closed";
  waiting: number;
  admitPerSecond: number;
  /** A new place needs a proof of work of this many bits (absent from older gateways: 0). */
  powBits?: number;
  invites?: boolean;
  lottery: {
    commitment: string;
    seed?: string;
    /** The drand chain and round the draw takes its beacon from (absent: no beacon). */
    drand?: { chainHash: string; round: number; roundAt: string; knownAs?: string };
    /** The pre-queue has closed and the draw waits for its drand round. */
    awaitingBeacon?: boolean;
  };
}

export interface SectionSummary {
  id: string;
  tier: string;
  price: number;
  rows?: number;
  seatsPerRow?: number;
  available: number;
  total: number;
}

export interface AreaSummary {
  id: string;
  tier: string;
  price: number;
  available: number;
  capacity: number;
}

export interface SeatMapSummary {
  eventId: string;
  name?: string;
  onSaleAt?: string;
  holdSeconds?: number;
  maxSeatsPerFan?: number;
  sections: SectionSummary[];
  generalAdmission: AreaSummary[];
}

export type SeatStatus = "available" | "held" | "sold";

export interface SectionSeats {
  sectionId: string;
  version: string;
  seats: { id: string; status: SeatStatus }[];
}

/** `?format=compact`: runs `[row, firstSeat, count]` in seat order, one status character a seat. */
export interface CompactSectionSeats {
  sectionId: string;
  version: string;
  layout: [row: number, firstSeat: number, count: number][];
  status: string;
}

export interface Hold {
  holdId: string;
  seats: string[];
  generalAdmission?: { id: string; quantity: number };
  expiresAt: string;
  amount: number;
}

export interface Purchase {
  purchaseId: string;
  status: "pending" | "confirmed" | "failed" | "refunded";
  seats?: string[];
  generalAdmission?: { id: string; quantity: number };
  amount?: number;
}

export interface Stats {
  waiting: number;
  admitted: number;
  active: number;
  abandoned?: number;
  completed?: number;
  seats: { available: number; held: number; sold: number; total?: number };
  sections?: { id: string; available: number; held: number; sold: number; total: number }[];
  generalAdmission: Record<string, { available: number; held?: number; sold: number; capacity?: number }>;
  purchases: { confirmed: number; pending: number; failed: number; refunded?: number };
  waitingRoom?: {
    state: string;
    effectiveAdmitPerSecond: number;
    servedThrough: number;
    /** A room with fan shards admits nobody until its sweep of lost places catches up. */
    awaitingSweep?: boolean;
    /** A room with claims: sessions offered at places passed, not yet claimed (they count against maxActive). */
    offered?: number;
    settings?: { admitPerSecond: number; maxActive: number; autoAdmit?: AutoAdmitSettings };
  };
  /** When seats, areas and purchases were counted (a shared snapshot, at most about 5 s old). */
  counts?: { at: string; source: string };
}

/** One sample of GET /v1/admin/events/{eventId}/stats/history. */
export interface StatsSample {
  at: number;
  countsAt: number;
  state: string;
  waiting: number;
  admitted: number;
  active: number;
  available: number;
  held: number;
  sold: number;
  purchases: { confirmed: number; pending: number; failed: number };
  admitPerSecond: number | null;
  effectiveAdmitPerSecond: number | null;
  /** The hold path's p99 over the slot, every gateway; null: no claims. */
  claimP99Ms?: number | null;
  /** Sessions ended so far (its slope: what checkout frees). */
  finished?: number;
  /** The admission loop's step in this slot, when it was on. */
  loop?: {
    rate: number;
    was: number;
    reason: string;
    finishingPerSecond: number | null;
    throttlesPerSecond: number | null;
    targetClaimP99Ms: number;
    minPerSecond: number;
    maxPerSecond: number;
  };
}

/** The closed loop's settings (PATCH .../waiting-room autoAdmit). */
export interface AutoAdmitSettings {
  enabled: boolean;
  minPerSecond: number;
  maxPerSecond: number;
  targetClaimP99Ms: number;
  maxThrottlesPerSecond: number;
}

export interface StatsHistory {
  eventId: string;
  intervalSeconds: number;
  windowSeconds: number;
  samples: StatsSample[];
  more: boolean;
}

export interface WaitingRoomSettings {
  onSaleAt: string;
  admitPerSecond: number;
  maxActive: number;
  sessionSeconds: number;
  abandonSeconds?: number;
  paused: boolean;
  /** In a reply, all of them; in a change, those to set. */
  autoAdmit?: Partial<AutoAdmitSettings>;
}

/**
 * Solves the line's proof-of-work challenge: a nonce such that SHA-256(challenge + ":" + nonce)
 * has `bits` leading zero bits. `progress` gets the share of the expected work done (pow.ts).
 */
export type PowSolver = (challenge: string, bits: number, progress: (share: number) => void) => Promise<string>;
