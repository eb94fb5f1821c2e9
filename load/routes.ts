/**
 * The gateway's routes as templates, the name a load test reports a request under. A per-hold or
 * per-purchase URL used as the name makes every hold id a metric series of its own (k6 names a
 * request by its URL unless told otherwise), so both the k6 scripts (`tags: { name }`) and the
 * Node driver (each endpoint row's `route`) name requests by these. No imports: it runs under k6
 * and Node alike.
 */
export const ROUTES = {
  join: "POST /v1/events/{eventId}/queue",
  challenge: "GET /v1/events/{eventId}/queue/challenge",
  settings: "PATCH /v1/admin/events/{eventId}/waiting-room",
  status: "GET /v1/events/{eventId}/queue/status",
  waitingRoom: "GET /v1/events/{eventId}/waiting-room",
  seatmap: "GET /v1/events/{eventId}/seatmap",
  sectionSeats: "GET /v1/events/{eventId}/sections/{sectionId}/seats",
  hold: "POST /v1/events/{eventId}/holds",
  release: "DELETE /v1/events/{eventId}/holds/{holdId}",
  purchase: "POST /v1/events/{eventId}/holds/{holdId}/purchase",
  putEvent: "PUT /v1/admin/events/{eventId}",
  eventStats: "GET /v1/admin/events/{eventId}/stats",
} as const;

export type RouteName = (typeof ROUTES)[keyof typeof ROUTES];

/** The path part of a route template: k6 tags the method on its own. */
export const routePath = (route: RouteName): string => route.slice(route.indexOf(" ") + 1);

const segment = "[^/?]+";
const matchers = Object.values(ROUTES).map((route) => {
  const [method, path] = route.split(" ") as [string, string];
  const pattern = path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[A-Za-z]+\}/g, segment);
  return { method, re: new RegExp(`^${pattern}(?:\\?.*)?$`), route };
});

/** The route template a request goes to, or `<METHOD> <path>` for a path outside the table. */
export function routeOf(method: string, path: string): string {
  const m = method.toUpperCase();
  for (const x of matchers) if (x.method === m && x.re.test(path)) return x.route;
  return `${m} ${path.split("?")[0]}`;
}
