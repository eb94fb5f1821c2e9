import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "../errors.js";

/** Extracts the bearer token of an Authorization header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+([^\s]+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * Compares the presented operator token with ADMIN_TOKEN in constant time. Both sides are hashed
 * first so that neither the comparison time nor an early length check leaks the token's length.
 */
export function createAdminCheck(adminToken: string) {
  const expected = createHash("sha256").update(adminToken).digest();
  return (header: string | undefined): void => {
    const token = bearerToken(header);
    if (!token) throw new ApiError("unauthenticated", "an operator token is required");
    const presented = createHash("sha256").update(token).digest();
    if (!timingSafeEqual(presented, expected)) throw new ApiError("unauthenticated", "the operator token is not valid");
  };
}
