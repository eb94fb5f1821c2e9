import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "../errors.js";

/** Extracts the bearer token of an Authorization header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+([^\s]+)\s*$/i.exec(header);
  return match?.[1];
}

const sha256 = (t: string) => createHash("sha256").update(t).digest();

/**
 * The bearer token of `header` is `expected` (METRICS_TOKEN), compared in constant time over
 * both hashes, so neither the time nor a length check leaks the token's length.
 */
export function bearerMatches(header: string | undefined, expected: string): boolean {
  const token = bearerToken(header);
  if (!token) return false;
  return timingSafeEqual(sha256(token), sha256(expected));
}

/** `admin` may do everything; `read` only GET (dashboards). */
export type OperatorRole = "admin" | "read";

/** Who made an operator request: the name and role of the token it carried. */
export interface Operator {
  name: string;
  role: OperatorRole;
}

export interface NamedOperatorToken extends Operator {
  token: string;
}

/** ADMIN_TOKEN's name in the action log: the one token there was before ADMIN_TOKENS. */
export const DEFAULT_OPERATOR = "default";

/**
 * The operator tokens in force: ADMIN_TOKEN as the admin token "default", then ADMIN_TOKENS.
 */
export function operatorTokens(adminToken: string, named: readonly NamedOperatorToken[] = []): NamedOperatorToken[] {
  return [
    { name: DEFAULT_OPERATOR, role: "admin", token: adminToken },
    ...named.filter((t) => t.name !== DEFAULT_OPERATOR),
  ];
}

/**
 * Finds the operator whose token is presented, in constant time: both sides are hashed first
 * (neither the comparison time nor a length check leaks a token's length), and the presented
 * hash is compared with every configured one, all of them, whichever matches, so the time says
 * nothing of which token (if any) it was nor where it stands in the list.
 */
export function createOperatorCheck(tokens: readonly NamedOperatorToken[]) {
  const expected = tokens.map((t) => ({
    hash: sha256(t.token),
    operator: { name: t.name, role: t.role } satisfies Operator,
  }));
  return (header: string | undefined): Operator => {
    const token = bearerToken(header);
    if (!token) throw new ApiError("unauthenticated", "an operator token is required");
    const presented = sha256(token);
    let found: Operator | undefined;
    for (const e of expected) {
      // No early exit: every hash is compared.
      if (timingSafeEqual(presented, e.hash) && !found) found = e.operator;
    }
    if (!found) throw new ApiError("unauthenticated", "the operator token is not valid");
    return found;
  };
}
