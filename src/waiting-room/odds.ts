/**
 * The odds of a seat at a fan's place in line: what is left against what the fans ahead will
 * take, at the rate fans admitted so far have taken seats (issue 18, item 5).
 *
 *   seatsPerFan = taken / admitted      once at least MIN_ADMITTED fans were admitted and took
 *                                       a seat or place (held or sold counts: a hold is a seat
 *                                       gone unless it lapses); else the event's maxSeatsPerFan
 *                                       (the worst case, said by `basis: "limit"`)
 *   chance      = min(1, left / ((ahead + 1) * seatsPerFan))
 *
 * It is an estimate, and said to be one: holds that lapse come back, fans ahead abandon, and the
 * rate moves as the sale goes. It never decides anything; DynamoDB still sells each seat once.
 */

/** Below this many admitted fans the seats taken per fan are not yet a rate worth showing. */
export const MIN_ADMITTED = 20;

export interface OddsFigures {
  /** Seats and standing places left (available in the cached map). */
  left: number;
  /** Seats and standing places of the event. */
  capacity: number;
  /** Fans admitted so far (a total). */
  admitted: number;
  maxSeatsPerFan: number;
}

export interface Odds {
  /** 0..1, two decimals. */
  chance: number;
  seatsLeft: number;
  fansAhead: number;
  /** Seats a fan takes, as used. */
  seatsPerFan: number;
  basis: "conversion" | "limit";
}

export function oddsAt(ahead: number, f: OddsFigures): Odds {
  const taken = Math.max(0, f.capacity - f.left);
  const measured = f.admitted >= MIN_ADMITTED && taken > 0;
  const seatsPerFan = measured ? taken / f.admitted : Math.max(1, f.maxSeatsPerFan);
  const left = Math.max(0, f.left);
  const fansAhead = Math.max(0, ahead);
  const chance = Math.min(1, left / ((fansAhead + 1) * seatsPerFan));
  return {
    chance: Math.floor(chance * 100) / 100,
    seatsLeft: left,
    fansAhead,
    seatsPerFan: Math.round(seatsPerFan * 100) / 100,
    basis: measured ? "conversion" : "limit",
  };
}
