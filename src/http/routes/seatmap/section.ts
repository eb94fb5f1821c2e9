import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { SectionFormat } from "../../../seatmap/formats.js";
import type { SectionPage } from "../../../seatmap/pages.js";
import type { AppEnv } from "../../context.js";
import { negotiateEncoding } from "../../encoding.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { SectionParams } from "../../schemas.js";

const Seats = z
  .object({
    sectionId: z.string(),
    version: z.string(),
    seats: z.array(z.object({ id: z.string(), status: z.enum(["available", "held", "sold"]) })),
  })
  .openapi("SectionSeats");

const CompactSeats = z
  .object({
    sectionId: z.string(),
    version: z.string(),
    layout: z.array(z.tuple([z.number().int(), z.number().int(), z.number().int()])).openapi({
      description:
        "The seats in order, as runs `[row, firstSeat, count]` of consecutive seat numbers in one row: " +
        "seat ids `<sectionId>-<row>-<firstSeat + k>` for k in 0..count-1",
      example: [
        [1, 1, 50],
        [2, 1, 50],
      ],
    }),
    status: z.string().openapi({
      description: "One character per seat, in the layout's order: `a` available, `h` held, `s` sold",
      example: "aahsa",
    }),
  })
  .openapi("SectionSeatsCompact");

const Query = z.object({
  format: z
    .enum(["json", "compact"])
    .optional()
    .openapi({
      param: { name: "format", in: "query" },
      description: "`json` (default): every seat spelled out. `compact`: the layout and one character per seat.",
    }),
});

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/sections/{sectionId}/seats",
  tags: ["seat map"],
  summary: "Every seat of a section with its status (from cache; ETag / If-None-Match; gzip / br)",
  description:
    "Served from the gateway's memory of the Redis cache (kept current by the seat-change pub/sub, at most " +
    "a fraction of a second stale); while Redis is down, from DynamoDB (the version then starts with `db.`). " +
    "A version is never reused, even after the cache was lost, so an ETag never matches other content. " +
    'The ETag is the version (`"<version>"`; `"<version>.c"` for `format=compact`), weak (`W/`) on a ' +
    "compressed body. Content-Encoding `br`, else `gzip`, else none, as Accept-Encoding allows " +
    "(q-values honoured); `Vary: Accept-Encoding`.",
  request: { params: SectionParams, query: Query },
  responses: {
    200: {
      description: "the seats",
      content: { "application/json": { schema: z.union([Seats, CompactSeats]) } },
    },
    304: { description: "unchanged since the ETag sent" },
    400: { description: "an unknown `format`", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event or section", content: { "application/json": { schema: ErrorBody } } },
    503: {
      description: "neither the cache nor DynamoDB could answer",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

/**
 * True when If-None-Match names `etag` (weak comparison, RFC 9110 §13.1.2: `W/` is ignored), or is
 * `*` (any current representation: the section exists, so it matches, §13.1.2).
 */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === "*") return true;
  for (const tag of ifNoneMatch.split(",")) {
    const t = tag.trim();
    if ((t.startsWith("W/") ? t.slice(2) : t) === etag) return true;
  }
  return false;
}

/** A section's answer, as plain values: the Hono route and the Node fast path write the same one. */
export interface SectionAnswer {
  status: 200 | 304;
  headers: Record<string, string>;
  body: Uint8Array | null;
}

/**
 * The 200 or 304 for a section's page: content coding from Accept-Encoding, the ETag of the
 * format (weak on a compressed body), If-None-Match. Plain header objects: @hono/node-server and
 * Node write them as they are, where web Headers would be validated through undici header by
 * header (more than the rest of this route costs). A promise only while a compressed body is
 * first made.
 */
export function sectionAnswer(
  page: SectionPage,
  format: SectionFormat,
  request: { acceptEncoding: string | undefined; ifNoneMatch: string | undefined; requestId: string },
): SectionAnswer | Promise<SectionAnswer> {
  const encoding = negotiateEncoding(request.acceptEncoding);
  const tag = page.etag(format);
  if (matches(request.ifNoneMatch, tag)) {
    return {
      status: 304,
      headers: {
        ETag: encoding === "identity" ? tag : `W/${tag}`,
        "Cache-Control": "no-cache",
        Vary: "Accept-Encoding",
        "X-Request-Id": request.requestId,
      },
      body: null,
    };
  }
  const answer = (body: Uint8Array): SectionAnswer => ({
    status: 200,
    headers:
      encoding === "identity"
        ? {
            ETag: tag,
            "Cache-Control": "no-cache",
            Vary: "Accept-Encoding",
            "Content-Type": "application/json",
            "Content-Length": String(body.byteLength),
            "X-Request-Id": request.requestId,
          }
        : {
            // Weak: the bytes differ from the identity body's, the content does not (RFC 9110 §8.8.1).
            ETag: `W/${tag}`,
            "Cache-Control": "no-cache",
            Vary: "Accept-Encoding",
            "Content-Type": "application/json",
            "Content-Encoding": encoding,
            "Content-Length": String(body.byteLength),
            "X-Request-Id": request.requestId,
          },
    body,
  });
  const body = page.body(format, encoding);
  return body instanceof Promise ? body.then(answer) : answer(body);
}

export const sectionSeatsRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId, sectionId } = c.req.valid("param");
  const format: SectionFormat = c.req.valid("query").format ?? "json";
  // c.get, not c.var: c.var copies every variable into a new object on each access.
  const event = await c.get("reads").event(eventId);
  if (!event) throw new ApiError("not_found", `no event ${eventId}`);
  if (!event.sections.some((s) => s.id === sectionId)) {
    throw new ApiError("not_found", `event ${eventId} has no section ${sectionId}`);
  }

  const { sectionPages, waitingRoom } = c.get("deps");
  // Fans on the seat map may be the only ones asking: bring back a room Redis lost.
  waitingRoom.ensureRoom(eventId);

  // Hot path: the page in memory, no await when it is trusted (src/seatmap/pages.ts).
  const found = sectionPages.get(eventId, sectionId);
  const page = found instanceof Promise ? await found : found;
  if (!page) throw new ApiError("not_found", `event ${eventId} has no section ${sectionId}`);

  // A returned Response is not merged with headers set by middleware: the answer carries the
  // request id itself.
  const pending = sectionAnswer(page, format, {
    acceptEncoding: c.req.header("accept-encoding"),
    ifNoneMatch: c.req.header("if-none-match"),
    requestId: c.get("requestId"),
  });
  const { status, headers, body } = pending instanceof Promise ? await pending : pending;
  return new Response(body as Uint8Array<ArrayBuffer> | null, { status, headers });
});
