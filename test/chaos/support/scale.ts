/**
 * How big the chaos scenarios are. `npm test` runs them short (a few seconds of sale each, so
 * the whole suite stays inside CI's budget); `npm run test:chaos` sets CHAOS=full: more fans, more
 * seats, more faults, longer sales.
 */
export const FULL = process.env.CHAOS === "full";

/** `short` under npm test, `full` under npm run test:chaos. */
export function scaled<T>(short: T, full: T): T {
  return FULL ? full : short;
}
