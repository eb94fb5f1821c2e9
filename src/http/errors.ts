/**
 * One error model for the whole API: `{"error": {code, message, requestId, details?}}`.
 * Codes map to statuses through one table, so a handler names what went wrong and never picks
 * a status by hand.
 */
import { z } from "@hono/zod-openapi";
import type { ContentfulStatusCode } from "hono/utils/http-status";

export const errorCodes = [
  "invalid_request",
  "unauthenticated",
  "forbidden",
  "not_found",
  "method_not_allowed",
  "request_timeout",
  "expectation_failed",
  "seat_unavailable",
  "no_block_available",
  "hold_expired",
  "hold_not_owned",
  "purchase_in_progress",
  "payment_declined",
  "payload_too_large",
  "headers_too_large",
  "seat_limit_exceeded",
  "idempotency_key_reused",
  "event_on_sale",
  "replacement_closed",
  "not_drawn",
  "lottery_open",
  "lottery_drawn",
  "wrong_beacon_round",
  "invalid_beacon",
  "no_beacon_chain",
  "rate_limited",
  "proof_of_work_required",
  "invalid_proof",
  "invite_required",
  "invalid_invite",
  "identity_already_queued",
  "not_sold_out",
  "notify_limit_reached",
  "notify_disabled",
  "auto_admit_enabled",
  "unavailable",
  "internal_error",
] as const;

export type ErrorCode = (typeof errorCodes)[number];

export const statusOf: Record<ErrorCode, ContentfulStatusCode> = {
  invalid_request: 400,
  unauthenticated: 401,
  payment_declined: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  expectation_failed: 417,
  seat_unavailable: 409,
  no_block_available: 409,
  hold_expired: 409,
  hold_not_owned: 409,
  purchase_in_progress: 409,
  event_on_sale: 409,
  replacement_closed: 409,
  not_drawn: 409,
  lottery_open: 409,
  lottery_drawn: 409,
  wrong_beacon_round: 409,
  invalid_beacon: 422,
  no_beacon_chain: 409,
  payload_too_large: 413,
  headers_too_large: 431,
  seat_limit_exceeded: 422,
  idempotency_key_reused: 422,
  rate_limited: 429,
  proof_of_work_required: 428,
  invalid_proof: 400,
  invite_required: 428,
  invalid_invite: 403,
  identity_already_queued: 409,
  not_sold_out: 409,
  notify_limit_reached: 409,
  notify_disabled: 404,
  auto_admit_enabled: 409,
  internal_error: 500,
  unavailable: 503,
};

export class ApiError extends Error {
  override name = "ApiError";
  readonly code: ErrorCode;
  readonly status: ContentfulStatusCode;
  readonly details: Record<string, unknown> | undefined;
  /** Seconds, sent as Retry-After (429, 503). */
  readonly retryAfter: number | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: Record<string, unknown>; retryAfter?: number; cause?: unknown } = {},
  ) {
    // An ApiError is an answer, not a fault: its stack is never sent nor logged (a 5xx logs its
    // code and details, and its cause keeps the cause's own stack). Capturing one anyway was a
    // measurable share of a hot-seat refusal, the path thousands of fans race at once.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    Error.stackTraceLimit = stackTraceLimit;
    this.code = code;
    this.status = statusOf[code];
    this.details = options.details;
    this.retryAfter = options.retryAfter;
  }
}

export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum(errorCodes),
      message: z.string(),
      requestId: z.string(),
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  })
  .openapi("Error");

export type ErrorBody = z.infer<typeof ErrorBody>;

export function errorBody(err: ApiError, requestId: string): ErrorBody {
  return {
    error: {
      code: err.code,
      message: err.message,
      requestId,
      ...(err.details ? { details: err.details } : {}),
    },
  };
}
