/**
 * A run's figures as its fans make them: the counts of the end report, the queue positions and
 * admission order Kendall's tau is taken over, and which seats came back to sale and were bought
 * again. One object per run, written by every journey (they all run on the one event loop).
 */

/** The run's counts, as the end report and the run's result carry them. */
export interface Tally {
  prequeued: number;
  admitted: number;
  holds: number;
  sales: number;
  seatsSold: number;
  conflicts: number;
  abandonedWaiting: number;
  released: number;
  lapsed: number;
  /** Seats bought that a release or a lapsed hold had returned to sale. */
  releasedSeatsResold: number;
  botRequests: number;
  botAccepted: number;
  /** Bot joins refused for want of a proof of work (428) or for a bad one (400). */
  botJoinsRefused: number;
  /** Joins that solved a proof-of-work challenge, the hashes and the ms it took them in all. */
  powSolved: number;
  powHashes: number;
  powSolveMs: number;
}

export class RunFigures {
  readonly tally: Tally = {
    prequeued: 0,
    admitted: 0,
    holds: 0,
    sales: 0,
    seatsSold: 0,
    conflicts: 0,
    abandonedWaiting: 0,
    released: 0,
    lapsed: 0,
    releasedSeatsResold: 0,
    botRequests: 0,
    botAccepted: 0,
    botJoinsRefused: 0,
    powSolved: 0,
    powHashes: 0,
    powSolveMs: 0,
  };
  /** Each admitted fan's queue position, and the order in which it saw `admitted`. */
  readonly positions: number[] = [];
  readonly admissionOrder: number[] = [];
  /** The positions of the admitted fans whose answer carried `admittedAt`, and those decision times (epoch ms). */
  readonly decidedPositions: number[] = [];
  readonly decidedAt: number[] = [];
  /** Epoch ms of the first admission and of the purchase of the last seat (null: not yet). */
  firstAdmitAt: number | null = null;
  soldOutAt: number | null = null;
  private readonly returned = new Set<string>();
  private readonly sold = new Set<string>();

  constructor(readonly seatsTotal: number) {}

  /**
   * Milliseconds from the line's decision to admit a fan (the status body's `admittedAt`) to the
   * fan's seeing it; the gateway's clock against the driver's, so across hosts it carries their
   * skew.
   */
  readonly admissionDelaysMs: number[] = [];
  /**
   * The part of each delay before the fan even asked: from the decision to the sending of the
   * poll that saw it (0 when that poll made the decision itself). The rest is the answer's time.
   */
  readonly admissionAskDelaysMs: number[] = [];

  admitted(position: number, delayMs?: number, askDelayMs?: number, decidedAt?: number): void {
    if (decidedAt !== undefined && Number.isFinite(decidedAt)) {
      this.decidedPositions.push(position);
      this.decidedAt.push(decidedAt);
    }
    if (delayMs !== undefined && Number.isFinite(delayMs)) this.admissionDelaysMs.push(Math.max(0, delayMs));
    if (askDelayMs !== undefined && Number.isFinite(askDelayMs))
      this.admissionAskDelaysMs.push(Math.max(0, askDelayMs));
    this.positions.push(position);
    this.admissionOrder.push(this.tally.admitted++);
    this.firstAdmitAt ??= Date.now();
  }

  /** Seats of a hold released or left to expire: back on sale. */
  returnedToSale(seats: readonly string[]): void {
    for (const s of seats) this.returned.add(s);
  }

  purchased(seats: readonly string[]): void {
    this.tally.sales++;
    for (const s of seats) {
      this.sold.add(s);
      if (this.returned.has(s)) this.tally.releasedSeatsResold++;
    }
    this.tally.seatsSold = this.sold.size;
    if (this.tally.seatsSold >= this.seatsTotal && this.soldOutAt === null) this.soldOutAt = Date.now();
  }
}
