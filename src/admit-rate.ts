/**
 * The range of an admission rate (fans a second), one rule wherever one is set: the event's PUT
 * (`waitingRoom.admitPerSecond`, src/inventory/schema.ts), the PATCH of the room and its loop's
 * bounds (src/http/routes/admin/waiting-room.ts), and the waiting room's own check
 * (src/waiting-room/operator.ts), so that what one accepts no other refuses.
 *
 * 0 stops admission. A positive rate is at least MIN_ADMIT_PER_SECOND: a rate is a promise to
 * the line (ETAs, poll advice and the odds divide by it), and 1e-300 a second shows an open room
 * that admits nobody, with ETAs of 1e300 s; it is also past what DynamoDB stores (numbers from
 * 1e-130), so the event's PUT failed as a 503. One fan every 1,000 s (about 17 minutes) is slower
 * than any sale runs; an operator who means "nobody" says 0 or `paused`. At most
 * MAX_ADMIT_PER_SECOND, the PATCH's limit from the start (the PUT had none).
 */
export const MIN_ADMIT_PER_SECOND = 0.001;
export const MAX_ADMIT_PER_SECOND = 100_000;

export const ADMIT_RATE_RULE = `0 (admission stopped) or ${MIN_ADMIT_PER_SECOND}..${MAX_ADMIT_PER_SECOND} fans a second`;

export function isAdmitRate(rate: number): boolean {
  return rate === 0 || (rate >= MIN_ADMIT_PER_SECOND && rate <= MAX_ADMIT_PER_SECOND);
}

/**
 * A rate stored before this rule (a room restored from it), brought into the range: a positive
 * rate below it is the slowest one, above it the fastest. Anything but a finite number is left
 * for the caller's check to refuse.
 */
export function withinAdmitRange(rate: number): number {
  if (!Number.isFinite(rate) || rate <= 0) return rate;
  return Math.min(MAX_ADMIT_PER_SECOND, Math.max(MIN_ADMIT_PER_SECOND, rate));
}
