/**
 * `GET /.well-known/jwks.json`: the public keys that verify this gateway's queue and access tokens
 * (TOKEN_ALG ES256 or EdDSA), so a CDN edge, a mobile backend or another service checks a token
 * without any secret of the gateway. Every listed key is published, the verify-only ones too (the
 * tokens they signed are still out there, and a key about to become active is listed first).
 *
 * With HS256 (the default) the set is empty, 200 `{"keys": []}`: the route has one shape on every
 * gateway, and a verifier pointed at it finds no key and refuses every token (a 404 would read as a
 * proxy that lost the route).
 *
 * Cacheable for 5 minutes (`Cache-Control: public, max-age=300`) with a strong ETag: a rotation
 * publishes the new key verify-only at least that long before it signs (docs/waiting-room.md).
 */
import { createHash } from "node:crypto";
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { JsonWebKeySet } from "../../waiting-room/index.js";
import type { AppEnv } from "../context.js";

/** How long a verifier may keep the set; a rotation waits at least this between its steps. */
export const JWKS_MAX_AGE_SECONDS = 300;

const Jwk = z
  .union([
    z.object({
      kty: z.literal("EC"),
      crv: z.literal("P-256"),
      x: z.string(),
      y: z.string(),
      kid: z.string(),
      alg: z.literal("ES256"),
      use: z.literal("sig"),
    }),
    z.object({
      kty: z.literal("OKP"),
      crv: z.literal("Ed25519"),
      x: z.string(),
      kid: z.string(),
      alg: z.literal("EdDSA"),
      use: z.literal("sig"),
    }),
  ])
  .openapi("Jwk");

const Jwks = z
  .object({ keys: z.array(Jwk).openapi({ description: "Empty when tokens are HS256 (TOKEN_ALG)" }) })
  .openapi("Jwks");

const route = createRoute({
  method: "get",
  path: "/.well-known/jwks.json",
  tags: ["service"],
  summary: "The public keys that verify queue and access tokens (JWKS, RFC 7517)",
  description:
    "ES256 (P-256) or EdDSA (Ed25519) keys, each with its `kid` (the token header names the key that signed it); " +
    "the verify-only keys of a rotation too. Empty with HS256. Cache-Control: public, max-age=300; ETag.",
  responses: {
    200: { description: "the key set", content: { "application/json": { schema: Jwks } } },
    304: { description: "the set the client has (If-None-Match)" },
  },
});

/** The set's bytes and ETag, made once per key set. */
const served = new WeakMap<JsonWebKeySet, { body: string; etag: string }>();

function servedOf(jwks: JsonWebKeySet): { body: string; etag: string } {
  let s = served.get(jwks);
  if (!s) {
    const body = JSON.stringify(jwks);
    s = { body, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"` };
    served.set(jwks, s);
  }
  return s;
}

export const jwksRoute = new OpenAPIHono<AppEnv>().openapi(route, (c) => {
  const { body, etag } = servedOf(c.get("deps").waitingRoom.jwks());
  c.header("Cache-Control", `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
  c.header("ETag", etag);
  const match = c.req.header("if-none-match");
  if (match?.split(",").some((t) => t.trim().replace(/^W\//, "") === etag || t.trim() === "*")) {
    return c.body(null, 304);
  }
  c.header("Content-Type", "application/json");
  return c.body(body, 200);
});
