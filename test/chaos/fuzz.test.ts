/**
 * Bad input: a property-based HTTP fuzzer over every endpoint of the contract, against a real
 * gateway process, over real sockets, batches of requests in flight at once.
 *
 * The endpoints come from the gateway's own /openapi.json (so a new endpoint is fuzzed without
 * editing this file), and every endpoint docs/API.md names must be in it. Each request is built
 * from an endpoint's schema and then spoiled: malformed JSON, wrong types, huge strings and
 * arrays (up to 1 MB), unicode (lone surrogates, NUL, RTL marks, emoji), missing and extra
 * fields, bad ids in the path, bodies over 16 KiB, garbage in Authorization, Content-Type,
 * Content-Length, Idempotency-Key, If-None-Match, X-Forwarded-For and other headers, wrong
 * methods. Requests are written byte for byte (test/chaos/support/http.ts sendRaw), so bytes an
 * HTTP client would refuse to send get sent.
 *
 * Property: every answer is a 2xx/3xx (the input happened to be valid) or a 4xx carrying the
 * JSON error body `{error: {code, message, requestId}}`; no 5xx; no stack trace or server path in
 * any body. After the run: the gateway counted no 5xx (/metrics), it is still up, and from after
 * the warm-up to the end, each time after a full garbage collection (through the inspector,
 * test/support/inspector.ts), the live V8 heap grew less than LIVE_HEAP_GROWTH_LIMIT (a leak) and
 * the RSS less than RSS_GROWTH_LIMIT (native memory: sockets, zlib, buffers).
 */
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { signWebhook } from "../../src/payments/webhook.js";
import { derivedWebhookSecret } from "../../src/gateway.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_TOKEN,
  admitFan,
  auditSale,
  type ChaosGateway,
  call,
  encodeRequest,
  type Fan,
  leaksInternals,
  putEvent,
  type RawOutcome,
  type RawRequest,
  rssBytes,
  SECRET,
  sendRaw,
  serverErrorsFromMetrics,
  smallEvent,
  startChaosGateway,
} from "./support/http.js";
import { recordScenario } from "./support/report.js";
import { connectInspector, type Inspector, inspectorUrlOf } from "../support/inspector.js";
import { scaled } from "./support/scale.js";

const RUNS = scaled(25, 160);
const BATCH = scaled(24, 40);
const WARM_UP_RUNS = scaled(6, 12);
/**
 * Bytes of live heap (after a full GC) the fuzzed run may add. Measured 2026-12-02, full run (6,880
 * requests): +1.4 MiB on Node 20.20, +1.7 MiB on Node 24.22; CI's short run +1.3 MiB. A leak of
 * one small object per request (say 2 KiB) would add 13 MiB in the full run.
 */
const LIVE_HEAP_GROWTH_LIMIT = 16 * 1024 * 1024;
/**
 * Bytes of RSS (after a full GC) the fuzzed run may add: native memory (sockets, zlib, buffers)
 * the heap check does not see. Measured the same day: -8.9 MiB on Node 20.20, +11.3 MiB on Node
 * 24.22 (full run), +3.0 MiB (CI's run). Without the forced GC the full run once grew 88 MiB, with
 * the heap at 146 MiB: V8 collecting late, not a leak.
 */
const RSS_GROWTH_LIMIT = 48 * 1024 * 1024;

/**
 * Replay of a failed run: FUZZ_SEED (and FUZZ_PATH) from the failure's report, applied to the
 * measured run (the warm-up stays random: the state it leaves differs in detail only).
 */
const REPLAY =
  process.env.FUZZ_SEED !== undefined
    ? { seed: Number(process.env.FUZZ_SEED), ...(process.env.FUZZ_PATH ? { path: process.env.FUZZ_PATH } : {}) }
    : {};

const EVENT = "fuzz_evt";
const OTHER_EVENT = "fuzz_other";
const WEBHOOK_SECRET = derivedWebhookSecret(SECRET);

// ---------------------------------------------------------------------------------------------
// The contract, as the gateway describes it

type Schema = { [key: string]: unknown };

type TokenKind = "queue" | "access" | "admin";

interface Endpoint {
  method: string;
  /** OpenAPI template, `/v1/events/{eventId}/holds`. */
  path: string;
  params: { name: string; in: string }[];
  secured: boolean;
  /** The token the endpoint wants, as its 401 answer describes it ("missing or bad queue token"). */
  token: TokenKind | undefined;
  body?: Schema;
}

interface OpenApiDoc {
  paths: Record<string, Record<string, Schema>>;
  components?: { schemas?: Record<string, Schema> };
}

function endpointsOf(doc: OpenApiDoc): Endpoint[] {
  const out: Endpoint[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const content = (op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)?.content;
      const body = content?.["application/json"]?.schema;
      const refusal =
        (op.responses as Record<string, { description?: string }> | undefined)?.["401"]?.description ?? "";
      const token = /operator/.test(refusal)
        ? "admin"
        : /queue/.test(refusal)
          ? "queue"
          : /access/.test(refusal)
            ? "access"
            : undefined;
      out.push({
        token,
        method: method.toUpperCase(),
        path,
        params: ((op.parameters as { name: string; in: string }[] | undefined) ?? []).map((p) => ({
          name: p.name,
          in: p.in,
        })),
        secured: Array.isArray(op.security) && op.security.length > 0,
        ...(body ? { body } : {}),
      });
    }
  }
  return out;
}

/** `METHOD /path` of every endpoint docs/API.md names in backticks. */
function endpointsOfApiMd(): string[] {
  const text = readFileSync("docs/API.md", "utf8");
  return [...text.matchAll(/`(GET|POST|PUT|PATCH|DELETE) (\/[^`\s]*)`/g)].map((m) => `${m[1]} ${m[2]}`);
}

// ---------------------------------------------------------------------------------------------
// What the run knows and learns: ids that exist, tokens that verify

interface Pools {
  fans: Fan[];
  otherEventFan: Fan;
  holdIds: string[];
  purchaseIds: string[];
  seatIds: string[];
}

const pools: Pools = {
  fans: [],
  otherEventFan: undefined as unknown as Fan,
  holdIds: [],
  purchaseIds: [],
  seatIds: [],
};

function learn(outcome: RawOutcome): void {
  if (outcome.kind !== "response") return;
  const text = outcome.response.body.toString("utf8");
  for (const [re, pool] of [
    [/"holdId":"([^"]{1,64})"/, pools.holdIds],
    [/"purchaseId":"([^"]{1,160})"/, pools.purchaseIds],
  ] as const) {
    const id = re.exec(text)?.[1];
    if (id && !pool.includes(id) && pool.length < 64) pool.push(id);
  }
}

// ---------------------------------------------------------------------------------------------
// Nasty values

const nastyStrings = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\u202e\u200fevil",
  "\u200b",
  "🎫🎟️👩‍👩‍👧‍👦",
  "\ud800",
  "\udfff",
  "a\ud800b",
  "\ufeff",
  "\r\n",
  "\\",
  '"',
  "../../etc/passwd",
  "%00",
  "%ZZ",
  "<script>alert(1)</script>",
  "'; DROP TABLE seats; --",
  "$" + "{jndi:ldap://x}",
  "{{7*7}}",
  "__proto__",
  "constructor",
  "NaN",
  "-0",
  "1e309",
  "é".repeat(200),
  "tok_ok",
];

const nastyString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...nastyStrings) },
  { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.integer({ min: 129, max: 4_000 }).map((n) => "x".repeat(n)) },
  { weight: 1, arbitrary: fc.integer({ min: 16_385, max: 1_048_576 }).map((n) => "y".repeat(n)) },
);

const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, -0, 1e308, 2 ** 53 + 1, [], {}, "") },
  { weight: 3, arbitrary: nastyString },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.array(nastyString, { maxLength: 5 }) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 101, max: 200_000 }).map((n) => Array.from({ length: n }, (_, i) => `A-1-${i}`)),
  },
  { weight: 1, arbitrary: fc.dictionary(nastyString, nastyString, { maxKeys: 4 }) },
);

// ---------------------------------------------------------------------------------------------
// Values that satisfy a schema (then spoiled by `mutated`)

function resolveRef(schema: Schema, doc: OpenApiDoc): Schema {
  let s = schema;
  for (let i = 0; i < 10 && typeof s.$ref === "string"; i++) {
    const name = (s.$ref as string).split("/").pop() ?? "";
    s = doc.components?.schemas?.[name] ?? {};
  }
  return s;
}

const named: Record<string, () => fc.Arbitrary<unknown>> = {
  paymentToken: () => fc.constantFrom("tok_ok", "tok_ok", "tok_decline", "tok_timeout", "tok_unknown"),
  fanId: () =>
    fc.oneof(fc.constantFrom("fuzz_fan_1", "fuzz_fan_2", "fuzz_fan_3"), fc.string({ minLength: 1, maxLength: 20 })),
  onSaleAt: () => fc.constantFrom("2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z", new Date().toISOString()),
};

function valid(schemaIn: Schema, doc: OpenApiDoc, key = ""): fc.Arbitrary<unknown> {
  const schema = resolveRef(schemaIn, doc);
  const variants = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  if (variants) return fc.oneof(...variants.map((v) => valid(v, doc, key)));
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if (named[key] && (schema.type === "string" || schema.type === undefined)) return named[key]();
  switch (schema.type) {
    case "object": {
      const props = (schema.properties ?? {}) as Record<string, Schema>;
      const required = (schema.required ?? []) as string[];
      const record: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [k, v] of Object.entries(props)) record[k] = valid(v, doc, k);
      return fc.record(record, { requiredKeys: required.filter((k) => k in props) });
    }
    case "array": {
      const min = (schema.minItems as number | undefined) ?? 0;
      const max = Math.min((schema.maxItems as number | undefined) ?? min + 3, min + 3);
      return fc.array(valid((schema.items ?? {}) as Schema, doc, key), { minLength: min, maxLength: max });
    }
    case "string": {
      const known = knownStrings().filter((s) => matches(schema, s));
      const generated = stringFor(schema);
      return known.length > 0 ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...known) }, generated) : generated;
    }
    case "integer": {
      // Small: a valid layout must never ask the table for 100,000 seats.
      const min = (schema.minimum as number | undefined) ?? 0;
      return fc.integer({ min, max: Math.min((schema.maximum as number | undefined) ?? min + 5, min + 5) });
    }
    case "number": {
      const min = (schema.minimum as number | undefined) ?? 0;
      return fc.double({ min, max: min + 100, noNaN: true, noDefaultInfinity: true });
    }
    case "boolean":
      return fc.boolean();
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

function knownStrings(): string[] {
  return [EVENT, OTHER_EVENT, "A", "B", "GA", ...pools.seatIds, "tok_ok", "Floor", "fuzz_fan_1"];
}

function matches(schema: Schema, s: string): boolean {
  if (typeof schema.pattern === "string" && !new RegExp(schema.pattern as string, "u").test(s)) return false;
  if (typeof schema.minLength === "number" && s.length < schema.minLength) return false;
  if (typeof schema.maxLength === "number" && s.length > schema.maxLength) return false;
  if (schema.format === "date-time" && Number.isNaN(Date.parse(s))) return false;
  return true;
}

function stringFor(schema: Schema): fc.Arbitrary<string> {
  if (typeof schema.pattern === "string") return fc.stringMatching(new RegExp(schema.pattern as string));
  if (schema.format === "date-time") {
    return fc
      .date({ min: new Date("2020-01-01"), max: new Date("2035-01-01"), noInvalidDate: true })
      .map((d) => d.toISOString());
  }
  if (schema.example !== undefined) return fc.constant(String(schema.example));
  const min = (schema.minLength as number | undefined) ?? 0;
  return fc.string({
    minLength: min,
    maxLength: Math.min((schema.maxLength as number | undefined) ?? min + 16, min + 16),
  });
}

/** A valid value with one thing wrong in it (a field dropped, added, or of the wrong kind). */
function mutated(value: unknown): fc.Arbitrary<unknown> {
  if (Array.isArray(value)) {
    if (value.length === 0)
      return fc.oneof(
        junk,
        junk.map((j) => [j]),
      );
    return fc.oneof(
      junk.map((j) => [...value, j]),
      fc
        .nat({ max: value.length - 1 })
        .chain((i) => mutated(value[i]).map((m) => value.map((v, k) => (k === i ? m : v)))),
      fc.constant([...value, ...value]),
      junk,
    );
  }
  if (value !== null && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj);
    const options: fc.Arbitrary<unknown>[] = [
      fc.tuple(nastyString, junk).map(([k, j]) => ({ ...obj, [k || "extra"]: j })),
      junk,
    ];
    if (keys.length > 0) {
      options.push(
        fc.constantFrom(...keys).map((k) => {
          const { [k]: _dropped, ...rest } = obj;
          return rest;
        }),
        fc.constantFrom(...keys).chain((k) => mutated(obj[k]).map((m) => ({ ...obj, [k]: m }))),
        fc.constantFrom(...keys).chain((k) => junk.map((j) => ({ ...obj, [k]: j }))),
      );
    }
    return fc.oneof(...options);
  }
  return junk;
}

// ---------------------------------------------------------------------------------------------
// One request: every part chosen, then spoiled or not

type Part<T> = fc.Arbitrary<T>;

/** A path segment as sent (already percent-encoded where it should be, raw where it should not). */
const badSegment: Part<string> = fc.oneof(
  fc.integer({ min: 33, max: 3_000 }).map((n) => "a".repeat(n)),
  fc.constantFrom(
    "#",
    "%23",
    "..",
    "%2e%2e",
    "..%2f..%2fetc%2fpasswd",
    "%00",
    "%ZZ",
    "%",
    "%E0%A4%A",
    "%C0%AF",
    "%F0%9F%8E%AB",
    "%E2%80%8F",
    "%E2%80%AE",
    "%ED%A0%80",
    "%20",
    "a%2Fb",
    "a/b",
    "",
    "__proto__",
    "A-1-1",
    "fuzz_evt%00",
    "fuzz-evt",
    "ünïcode",
    "a b",
    "%FF%FE",
  ),
  fc
    .uint8Array({ minLength: 1, maxLength: 40 })
    .map((bytes) => [...bytes].map((b) => `%${b.toString(16).padStart(2, "0").toUpperCase()}`).join("")),
  fc
    .string({ unit: "binary", minLength: 1, maxLength: 20 })
    .map((s) => encodeURIComponent(Buffer.from(s, "utf8").toString("utf8"))),
);

const validId: Part<string> = fc.stringMatching(/^[A-Za-z0-9_]{1,32}$/);

/** `pool:` values are taken from what the run has learnt when the request is sent. */
function paramValue(name: string): Part<string> {
  const bad = { weight: 3, arbitrary: badSegment };
  switch (name) {
    case "eventId":
      return fc.oneof(
        { weight: 8, arbitrary: fc.constant(EVENT) },
        { weight: 1, arbitrary: fc.constant(OTHER_EVENT) },
        { weight: 1, arbitrary: validId },
        bad,
      );
    case "sectionId":
      return fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom("A", "B", "GA") },
        { weight: 1, arbitrary: validId },
        bad,
      );
    case "holdId":
      return fc.oneof(
        { weight: 6, arbitrary: fc.nat().map((i) => `pool:holdId:${i}`) },
        { weight: 1, arbitrary: fc.stringMatching(/^[0-9a-f]{48}$/) },
        { weight: 1, arbitrary: fc.integer({ min: 65, max: 200 }).map((n) => "h".repeat(n)) },
        bad,
      );
    case "purchaseId":
      return fc.oneof(
        { weight: 6, arbitrary: fc.nat().map((i) => `pool:purchaseId:${i}`) },
        { weight: 1, arbitrary: fc.stringMatching(/^[a-z2-7]{26}$/).map((s) => `${EVENT}-${s}`) },
        bad,
      );
    default:
      return fc.oneof({ weight: 3, arbitrary: validId }, bad);
  }
}

type Auth =
  | { kind: "none" }
  | { kind: "queue" | "access" | "other_event_access" | "admin"; fan: number }
  | { kind: "raw"; value: string | Buffer };

const jwtish = fc
  .tuple(fc.base64String({ maxLength: 60 }), fc.base64String({ maxLength: 120 }), fc.base64String({ maxLength: 60 }))
  .map(([a, b, c]) => `${a}.${b}.${c}`.replaceAll("=", ""));

/** Mostly the token the endpoint wants (so the rest of the request is what gets tested), else any other. */
const authFor = (endpoint: Endpoint): Part<Auth> =>
  fc.oneof(
    { weight: endpoint.token ? 1 : 6, arbitrary: fc.constant({ kind: "none" } as Auth) },
    ...(endpoint.token
      ? [{ weight: 8, arbitrary: fc.nat({ max: 5 }).map((fan) => ({ kind: endpoint.token, fan }) as Auth) }]
      : []),
    { weight: 2, arbitrary: wrongAuth },
  );

const wrongAuth: Part<Auth> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom("queue", "access", "other_event_access", "admin"), fc.nat({ max: 5 }))
      .map(([kind, fan]) => ({ kind, fan }) as Auth),
  },
  {
    weight: 1,
    arbitrary: fc
      .oneof(
        fc.constantFrom(
          "Bearer",
          "Bearer ",
          "Bearer garbage",
          "Basic dXNlcjpwYXNz",
          "bearer  a  b",
          "Bearer null",
          "Bearer a.b.c",
          "Token x",
          "Bearer eyJhbGciOiJub25lIn0.e30.",
        ),
        jwtish.map((t) => `Bearer ${t}`),
        nastyString.map((s) => `Bearer ${Buffer.from(s, "utf8").toString("latin1")}`),
        fc.integer({ min: 1_000, max: 20_000 }).map((n) => `Bearer ${"t".repeat(n)}`),
        fc
          .uint8Array({ minLength: 1, maxLength: 30 })
          .map((b) => Buffer.concat([Buffer.from("Bearer "), Buffer.from(b)])),
      )
      .map((value) => ({ kind: "raw", value }) as Auth),
  },
);

const contentType: Part<string | null> = fc.oneof(
  { weight: 12, arbitrary: fc.constant("application/json") },
  { weight: 1, arbitrary: fc.constant(null) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "text/plain",
      "application/json; charset=utf-16",
      'application/json; charset="',
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "APPLICATION/JSON",
      "application/json, text/html",
      ";;;==",
      "application/jsonx",
      "application/merge-patch+json",
      `application/json; ${"p=1; ".repeat(2_000)}`,
    ),
  },
);

type Body =
  | { kind: "none" }
  | { kind: "json"; value: unknown }
  | { kind: "text"; text: string }
  | { kind: "bytes"; bytes: Uint8Array };

function bodyFor(endpoint: Endpoint, doc: OpenApiDoc): Part<Body> {
  const schema = endpoint.body;
  const validBody = schema ? valid(schema, doc) : fc.jsonValue({ maxDepth: 3 });
  return fc.oneof(
    { weight: 6, arbitrary: validBody.map((value) => ({ kind: "json", value }) as Body) },
    { weight: 5, arbitrary: validBody.chain(mutated).map((value) => ({ kind: "json", value }) as Body) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((value) => ({ kind: "json", value }) as Body) },
    {
      weight: 2,
      arbitrary: fc
        .oneof(
          validBody
            .map((v) => JSON.stringify(v) ?? "")
            .chain((t) => fc.nat({ max: Math.max(0, t.length - 1) }).map((n) => t.slice(0, n))),
          fc.constantFrom(
            "{",
            "{not json",
            "[1,2",
            '{"a":}',
            "nul",
            "'single'",
            '{"a":1}}',
            "\ufeff{}",
            "{}{}",
            "1e99999",
          ),
          fc.integer({ min: 1_000, max: 8_000 }).map((d) => `${"[".repeat(d)}${"]".repeat(d)}`),
          fc.integer({ min: 500, max: 2_500 }).map((d) => `${'{"a":'.repeat(d)}1${"}".repeat(d)}`),
          fc.string({ unit: "binary", maxLength: 200 }),
        )
        .map((text) => ({ kind: "text", text }) as Body),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes) => ({ kind: "bytes", bytes }) as Body) },
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: 16_385, max: 1_048_576 })
        .map((n) => ({ kind: "text", text: `{"fanId":"${"z".repeat(n)}"}` }) as Body),
    },
    { weight: 1, arbitrary: fc.constant({ kind: "none" } as Body) },
  );
}

type Header = [string, string | Buffer];

const extraHeader: Part<Header> = fc.oneof(
  fc
    .oneof(
      fc.constantFrom("k1", "k2", "", " ", "k".repeat(129), "\u00ff\u00fe"),
      fc.stringMatching(/^[\x21-\x7E]{1,128}$/),
      fc.integer({ min: 1_000, max: 12_000 }).map((n) => "i".repeat(n)),
    )
    .map((v) => ["Idempotency-Key", v] as Header),
  fc
    .oneof(
      fc.constantFrom("*", '"x"', 'W/"x"', '"', "", ",,,,", `${'"a", '.repeat(1_000)}"b"`, "\u00e9\u00ff"),
      fc.string({ maxLength: 60 }),
    )
    .map((v) => ["If-None-Match", v] as Header),
  fc
    .oneof(
      fc.constantFrom(
        "",
        "not-an-ip",
        "::1",
        "1.2.3.4, 5.6.7.8",
        "999.999.999.999",
        "unknown",
        ",",
        "\u00ff\u00fe",
        `${"10.0.0.1, ".repeat(1_000)}1.1.1.1`,
      ),
      fc.ipV4(),
      fc.ipV6(),
      fc.string({ maxLength: 80 }),
    )
    .map((v) => ["X-Forwarded-For", v] as Header),
  fc
    .oneof(fc.constantFrom("", "x".repeat(300), "a b", "\u00ff"), fc.string({ maxLength: 40 }))
    .map((v) => ["X-Request-Id", v] as Header),
  fc
    .oneof(
      fc.constantFrom(
        "",
        "t=1,v1=00",
        "garbage",
        `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}`,
        "t=99999999999999,v1=x",
        "SIGN",
      ),
    )
    .map((v) => ["Payment-Signature", v] as Header),
  fc.constantFrom<Header>(
    ["Transfer-Encoding", "chunked"],
    ["Transfer-Encoding", "gzip"],
    ["Transfer-Encoding", "garbage"],
    ["Content-Encoding", "gzip"],
    ["Expect", "100-continue"],
    ["Expect", "garbage"],
    ["Accept", "text/html"],
    ["Accept-Encoding", "gzip, br, zstd"],
    ["Connection", "Upgrade"],
    ["Upgrade", "websocket"],
    ["Range", "bytes=0-1"],
    ["Host", "evil.example:99999"],
    ["Host", ""],
    ["Origin", "null"],
    ["Cookie", "a=1"],
  ),
  fc
    .tuple(
      fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,30}$/),
      fc.oneof(
        fc.string({ maxLength: 60 }),
        fc.integer({ min: 1_000, max: 20_000 }).map((n) => "v".repeat(n)),
      ),
    )
    .map(([n, v]) => [`X-${n}`, v] as Header),
);

interface Spec {
  endpoint: string;
  method: string;
  params: Record<string, string>;
  query: string;
  auth: Auth;
  contentType: string | null;
  body: Body;
  headers: Header[];
  contentLength: "auto" | "none" | "short" | "long";
}

const otherMethod = fc.constantFrom(
  "GET",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "HEAD",
  "OPTIONS",
  "TRACE",
  "CONNECT",
  "FOO",
  "get",
);

function specFor(endpoint: Endpoint, doc: OpenApiDoc): Part<Spec> {
  const pathParams = endpoint.params.filter((p) => p.in === "path");
  const params = fc.record(Object.fromEntries(pathParams.map((p) => [p.name, paramValue(p.name)])));
  return fc.record({
    endpoint: fc.constant(`${endpoint.method} ${endpoint.path}`),
    method: fc.oneof({ weight: 12, arbitrary: fc.constant(endpoint.method) }, { weight: 1, arbitrary: otherMethod }),
    params,
    query: fc.oneof(
      { weight: 8, arbitrary: fc.constant("") },
      { weight: 1, arbitrary: fc.constantFrom("?", "?a=1&a=2", "?%ZZ", "?x=%00", "?__proto__[a]=1", "?#frag") },
      { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((n) => `?q=${"q".repeat(n)}`) },
    ),
    auth: authFor(endpoint),
    contentType,
    body:
      endpoint.method === "GET" || endpoint.method === "DELETE"
        ? fc.oneof(
            { weight: 9, arbitrary: fc.constant({ kind: "none" } as Body) },
            { weight: 1, arbitrary: bodyFor(endpoint, doc) },
          )
        : bodyFor(endpoint, doc),
    headers: fc.oneof(
      { weight: 2, arbitrary: fc.constant<Header[]>([]) },
      { weight: 3, arbitrary: fc.array(extraHeader, { minLength: 1, maxLength: 3 }) },
    ),
    contentLength: fc.oneof(
      { weight: 20, arbitrary: fc.constant("auto" as const) },
      { weight: 1, arbitrary: fc.constantFrom("none" as const, "short" as const, "long" as const) },
    ),
  });
}

function fromPool(value: string): string {
  const m = /^pool:(holdId|purchaseId):(\d+)$/.exec(value);
  if (!m) return value;
  const pool = m[1] === "holdId" ? pools.holdIds : pools.purchaseIds;
  return pool.length === 0 ? "none" : pool[Number(m[2]) % pool.length]!;
}

function tokenOf(a: Auth): string | Buffer | undefined {
  switch (a.kind) {
    case "none":
      return undefined;
    case "raw":
      return a.value;
    case "admin":
      return `Bearer ${ADMIN_TOKEN}`;
    case "other_event_access":
      return `Bearer ${pools.otherEventFan.accessToken}`;
    case "queue":
      return `Bearer ${pools.fans[a.fan % pools.fans.length]!.queueToken}`;
    case "access":
      return `Bearer ${pools.fans[a.fan % pools.fans.length]!.accessToken}`;
  }
}

/** The bytes of a spec, with what the run knows filled in. */
function build(spec: Spec, endpoint: Endpoint, port: number): { request: RawRequest; incomplete: boolean } {
  const params = Object.fromEntries(Object.entries(spec.params).map(([k, v]) => [k, fromPool(v)]));
  // The fuzzer never creates events: an operator PUT with the real token goes to the event on sale.
  if (spec.auth.kind === "admin" && spec.method === "PUT" && "eventId" in params) params.eventId = EVENT;
  const target = endpoint.path.replace(/\{([^}]+)\}/g, (_, name: string) => params[name] ?? "x") + spec.query;

  let body: Buffer | undefined;
  if (spec.body.kind === "json") body = Buffer.from(JSON.stringify(spec.body.value) ?? "null", "utf8");
  else if (spec.body.kind === "text") body = Buffer.from(spec.body.text, "utf8");
  else if (spec.body.kind === "bytes") body = Buffer.from(spec.body.bytes);

  const headers: [string, string | Buffer][] = [];
  const hostOverride = spec.headers.some(([n]) => n === "Host");
  if (!hostOverride) headers.push(["Host", `127.0.0.1:${port}`]);
  const token = tokenOf(spec.auth);
  if (token !== undefined) headers.push(["Authorization", token]);
  if (spec.contentType !== null && body) headers.push(["Content-Type", spec.contentType]);
  for (const [name, value] of spec.headers) {
    if (name === "Payment-Signature" && value === "SIGN") headers.push([name, signWebhook(WEBHOOK_SECRET, body ?? "")]);
    else headers.push([name, typeof value === "string" ? Buffer.from(value, "utf8") : value]);
  }
  const chunked = spec.headers.some(([n, v]) => n === "Transfer-Encoding" && v === "chunked");

  let contentLength: RawRequest["contentLength"] = body ? "auto" : "none";
  let incomplete = false;
  if (body && spec.contentLength === "none") contentLength = "none";
  if (body && spec.contentLength === "short") contentLength = Math.max(0, body.length - 3);
  if (spec.contentLength === "long") {
    contentLength = (body?.length ?? 0) + 10;
    incomplete = true;
  }
  if (chunked && body && contentLength === "auto") {
    // A real chunked body, unless a Content-Length was also asked for (that conflict is a 400).
    body = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from("\r\n0\r\n\r\n")]);
    contentLength = "none";
  }
  if (chunked) incomplete = true; // a refused framing may leave the server waiting for more
  return { request: { method: spec.method, target, headers, ...(body ? { body } : {}), contentLength }, incomplete };
}

// ---------------------------------------------------------------------------------------------
// The property

interface Tally {
  requests: number;
  byStatus: Map<number, number>;
  noResponse: number;
  expectedNoResponse: number;
  serverErrors: number;
}

const tally: Tally = { requests: 0, byStatus: new Map(), noResponse: 0, expectedNoResponse: 0, serverErrors: 0 };

function describeRequest(req: RawRequest): string {
  const head = encodeRequest({ ...req, body: undefined, contentLength: "none" })
    .toString("latin1")
    .replace(/[^\x20-\x7e\r\n]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`)
    .split("\r\n")
    .map((l) => (l.length > 300 ? `${l.slice(0, 300)}... (${l.length} chars)` : l))
    .join("\n  ");
  const body = req.body ? req.body.subarray(0, 300).toString("utf8") : "";
  return `${head}\n  body (${req.body?.length ?? 0} bytes, Content-Length ${String(req.contentLength)}): ${body}`;
}

/** The body decoded per its Content-Encoding, or why it cannot be. */
function decodeBody(body: Buffer, encoding: string | undefined): Buffer | string {
  const coding = (encoding ?? "identity").trim().toLowerCase();
  try {
    if (coding === "identity" || coding === "") return body;
    if (coding === "br") return brotliDecompressSync(body);
    if (coding === "gzip" || coding === "x-gzip") return gunzipSync(body);
    return `a body in Content-Encoding ${coding}, which the request did not offer`;
  } catch (err) {
    return `a body that is not valid ${coding}: ${(err as Error).message}`;
  }
}

/** Why this answer breaks the property, or null. */
function violation(outcome: RawOutcome, req: RawRequest, incomplete: boolean): string | null {
  if (outcome.kind === "no_response") {
    return incomplete ? null : `no answer (${outcome.reason} after ${Math.round(outcome.ms)} ms)`;
  }
  const { status, headers } = outcome.response;
  // The fuzzer sends Accept-Encoding, and the seat map honours it: read the body as a client
  // would, decoded per Content-Encoding. A body that does not decode is a violation too.
  const decoded = decodeBody(outcome.response.body, headers["content-encoding"]);
  if (typeof decoded === "string") return `${status}: ${decoded}`;
  const text = decoded.toString("utf8");
  const leak = leaksInternals(text);
  if (leak) return `${status}: the body leaks ${JSON.stringify(leak)}`;
  if (status >= 500) return `${status} ${text.slice(0, 500)}`;
  if (status < 200 || (status >= 300 && status < 400 && status !== 304 && !headers.location)) {
    return `unexpected status ${status}`;
  }
  if (status >= 400) {
    if (!/^application\/json/.test(headers["content-type"] ?? "")) {
      return `${status} with Content-Type ${headers["content-type"]}: ${text.slice(0, 200)}`;
    }
    if (req.method === "HEAD") return null;
    let parsed: { error?: { code?: unknown; message?: unknown; requestId?: unknown } };
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      return `${status} with a body that is not JSON: ${text.slice(0, 200)}`;
    }
    const e = parsed.error;
    if (!e || typeof e.code !== "string" || !/^[a-z_]+$/.test(e.code))
      return `${status} without error.code: ${text.slice(0, 200)}`;
    if (typeof e.message !== "string" || e.message === "") return `${status} without error.message`;
    if (typeof e.requestId !== "string" || e.requestId === "") return `${status} without error.requestId`;
    if (headers["x-request-id"] !== e.requestId)
      return `${status}: X-Request-Id ${headers["x-request-id"]} is not the body's ${e.requestId}`;
    if ((status === 429 || status === 503) && !headers["retry-after"]) return `${status} without Retry-After`;
    if (status === 405 && !headers.allow) return "405 without Allow";
    return null;
  }
  if (/^application\/json/.test(headers["content-type"] ?? "") && req.method !== "HEAD" && text !== "") {
    try {
      JSON.parse(text);
    } catch {
      return `${status} application/json that does not parse: ${text.slice(0, 200)}`;
    }
  }
  return null;
}

/**
 * fast-check's own report prints the whole counterexample: a batch of 1 MB strings. This one
 * says what went wrong (the requests and answers, trimmed) and how to replay it.
 */
function shortReport<T>(details: fc.RunDetails<T>): void {
  if (!details.failed) return;
  const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  throw new Error(
    `property failed after ${details.numRuns} run(s) (replay: seed ${details.seed}, path "${details.counterexamplePath}"):\n${cause}`,
  );
}

async function runBatch(gw: ChaosGateway, batch: { spec: Spec; endpoint: Endpoint }[]): Promise<string[]> {
  const built = batch.map(({ spec, endpoint }) => build(spec, endpoint, gw.port));
  const outcomes = await Promise.all(
    built.map(({ request, incomplete }) =>
      sendRaw(gw.host, gw.port, encodeRequest(request), {
        method: request.method,
        timeoutMs: incomplete ? 5_000 : 30_000,
      }),
    ),
  );
  const failures: string[] = [];
  outcomes.forEach((outcome, i) => {
    const { request, incomplete } = built[i]!;
    tally.requests++;
    learn(outcome);
    if (outcome.kind === "no_response") {
      if (incomplete) tally.expectedNoResponse++;
      else tally.noResponse++;
    } else {
      const s = outcome.response.status;
      tally.byStatus.set(s, (tally.byStatus.get(s) ?? 0) + 1);
      if (s >= 500) tally.serverErrors++;
    }
    const why = violation(outcome, request, incomplete);
    if (why) failures.push(`${batch[i]!.spec.endpoint}: ${why}\n  ${describeRequest(request)}`);
  });
  return failures;
}

// ---------------------------------------------------------------------------------------------

let gw: ChaosGateway;
let inspector: Inspector | undefined;
let doc: OpenApiDoc;
let endpoints: Endpoint[];

beforeAll(async () => {
  // The inspector on loopback: the memory check collects garbage before it reads the heap.
  gw = await startChaosGateway({ TRUST_PROXY: "true", PAYMENT_TIMEOUT_MS: "1500" }, ["--inspect=127.0.0.1:0"]);
  const wsUrl = inspectorUrlOf(gw.process.logs);
  if (!wsUrl) throw new Error(`the fuzzed gateway printed no inspector address:\n${gw.process.logs.join("\n")}`);
  inspector = await connectInspector(wsUrl);
  // Holds of a few seconds: seats come back while the run lasts, so valid holds and purchases keep
  // reaching DynamoDB instead of meeting the seat limit or sold-out seats after the first batches.
  await putEvent(gw, EVENT, smallEvent({ holdSeconds: 4, maxSeatsPerFan: 10 }));
  await putEvent(gw, OTHER_EVENT);
  pools.seatIds = ["A", "B"].flatMap((section) =>
    Array.from({ length: section === "A" ? 40 : 20 }, (_, i) => `${section}-${1 + Math.floor(i / 10)}-${1 + (i % 10)}`),
  );
  pools.fans = await Promise.all(Array.from({ length: 6 }, (_, i) => admitFan(gw, EVENT, `fuzz_${i + 1}`)));
  pools.otherEventFan = await admitFan(gw, OTHER_EVENT, "fuzz_other_1");
  // A hold and a purchase that exist, for the ids in paths.
  const alice = pools.fans[0]!;
  const held = await call(gw.url, "POST", `/v1/events/${EVENT}/holds`, {
    token: alice.accessToken,
    json: { seats: ["A-2-1"] },
  });
  expect(held.status).toBe(201);
  pools.holdIds.push((held.body as { holdId: string }).holdId);
  const bob = pools.fans[1]!;
  const held2 = await call(gw.url, "POST", `/v1/events/${EVENT}/holds`, {
    token: bob.accessToken,
    json: { seats: ["A-2-2"] },
  });
  const bought = await call(
    gw.url,
    "POST",
    `/v1/events/${EVENT}/holds/${(held2.body as { holdId: string }).holdId}/purchase`,
    {
      token: bob.accessToken,
      json: { paymentToken: "tok_ok" },
      headers: { "idempotency-key": "setup-1" },
    },
  );
  expect(bought.status).toBe(201);
  pools.purchaseIds.push((bought.body as { purchaseId: string }).purchaseId);
  doc = (await call(gw.url, "GET", "/openapi.json")).body as OpenApiDoc;
  endpoints = endpointsOf(doc);
}, 180_000);

afterAll(async () => {
  inspector?.close();
  await gw?.stop();
}, 60_000);

describe("bad input: a property-based HTTP fuzzer over every endpoint", () => {
  it("fuzzes every endpoint docs/API.md names (the list comes from /openapi.json)", () => {
    const served = new Set(endpoints.map((e) => `${e.method} ${e.path}`));
    const documented = endpointsOfApiMd();
    expect(documented.length).toBeGreaterThanOrEqual(15);
    expect(documented.filter((e) => !served.has(e))).toEqual([]);
  });

  it("answers every request with a 2xx/3xx or a JSON 4xx error, never a 5xx; stays up with flat memory", async () => {
    const requestArb = fc
      .constantFrom(...endpoints)
      .chain((endpoint) => specFor(endpoint, doc).map((spec) => ({ spec, endpoint })));
    const batchArb = fc.array(requestArb, { minLength: BATCH, maxLength: BATCH });
    const started = Date.now();

    // Warm-up: code paths compiled, caches and pools at their working size.
    await fc.assert(
      fc.asyncProperty(batchArb, async (batch) => {
        const failures = await runBatch(gw, batch);
        if (failures.length > 0)
          throw new Error(`${failures.length} bad answers:\n${failures.slice(0, 5).join("\n\n")}`);
      }),
      { numRuns: WARM_UP_RUNS, endOnFailure: true, reporter: shortReport },
    );
    const live = async () => {
      await inspector!.collectGarbage();
      return { rss: rssBytes(gw.pid), heap: (await inspector!.memoryUsage()).heapUsed };
    };
    const before = await live();

    await fc.assert(
      fc.asyncProperty(batchArb, async (batch) => {
        const failures = await runBatch(gw, batch);
        if (failures.length > 0)
          throw new Error(`${failures.length} bad answers:\n${failures.slice(0, 5).join("\n\n")}`);
      }),
      { numRuns: RUNS, endOnFailure: true, reporter: shortReport, ...REPLAY },
    );
    const after = await live();
    const seconds = (Date.now() - started) / 1000;

    // Still up, still answering, and it counted no 5xx of its own (including answers no one read).
    expect(gw.process.child.exitCode).toBeNull();
    expect((await call(gw.url, "GET", "/healthz")).status).toBe(200);
    const counted5xx = await serverErrorsFromMetrics(gw.url);
    const errorLogs = gw.process.logs.filter((l) => l.includes('"level":50'));

    const audit = await auditSale(gw, EVENT);
    const statuses = [...tally.byStatus.entries()]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}:${n}`)
      .join(" ");
    const mib = (b: number) => (b / 1024 / 1024).toFixed(1);
    const notes =
      `${tally.requests} fuzzed requests in ${seconds.toFixed(0)} s, ${BATCH} in flight at once; statuses ${statuses}; ` +
      `${tally.expectedNoResponse} unanswered on purpose (a Content-Length longer than the body, refused chunking); ` +
      `after a full GC: V8 heap used ${mib(before.heap)} -> ${mib(after.heap)} MiB (+${mib(after.heap - before.heap)}), ` +
      `RSS ${mib(before.rss)} -> ${mib(after.rss)} MiB (+${mib(after.rss - before.rss)}) on Node ${process.version}`;
    console.log(`fuzz: ${notes}; 5xx counted by the gateway ${JSON.stringify(counted5xx)}`);
    recordScenario({
      scenario: "bad input: HTTP fuzzer",
      faults: `malformed/huge/unicode bodies, bad ids and headers over ${endpoints.length} endpoints`,
      requests: tally.requests,
      oversells: audit.oversells,
      lostPurchases: audit.lostPurchases,
      serverErrors: tally.serverErrors + Object.values(counted5xx).reduce((a, b) => a + b, 0),
      unavailable: tally.byStatus.get(503) ?? 0,
      notes,
    });

    expect(tally.serverErrors).toBe(0);
    expect(counted5xx).toEqual({});
    expect(errorLogs).toEqual([]);
    expect(tally.noResponse).toBe(0);
    expect(after.heap - before.heap).toBeLessThan(LIVE_HEAP_GROWTH_LIMIT);
    expect(after.rss - before.rss).toBeLessThan(RSS_GROWTH_LIMIT);
    expect(audit.report.ok, JSON.stringify(audit.report.checks.filter((c) => c.status === "fail"))).toBe(true);
    expect(audit.oversells).toBe(0);
    expect(audit.lostPurchases).toBe(0);
  }, 600_000);
});
