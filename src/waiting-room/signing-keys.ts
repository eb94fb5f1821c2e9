/**
 * The asymmetric keys that sign queue and access tokens when `TOKEN_ALG` is ES256 or EdDSA, and
 * the JWKS that publishes their public halves, so a CDN edge, a mobile backend or another service
 * checks a token without holding any secret of the gateway.
 *
 * A key set is a list of `{kid, alg, state, privateKeyPem | publicKeyPem}`:
 *  - exactly one `active` key, with its private key: it signs every new token, and its `kid`
 *    goes in the token's header;
 *  - any number of `verify-only` keys (a private or only a public key): tokens that name them
 *    still verify, and the JWKS lists them, but nothing new is signed with them.
 * A rotation is three deploys: add the new key verify-only (published before it signs: verifiers
 * that cache the JWKS learn it first); make it active and the old one verify-only; remove the old
 * one once its last token has expired (queue tokens live 7 days, access tokens a session).
 *
 * ES256 is ECDSA on P-256 with SHA-256, signatures as JWS wants them (r || s, 64 bytes); EdDSA is
 * Ed25519 (RFC 8037). No other curve is accepted: the JWKS says which one each key is.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, randomBytes } from "node:crypto";
import { z } from "zod";

export type AsymmetricAlgorithm = "ES256" | "EdDSA";
export type TokenAlgorithm = "HS256" | AsymmetricAlgorithm;
export const TOKEN_ALGORITHMS = ["HS256", "ES256", "EdDSA"] as const satisfies readonly TokenAlgorithm[];

/** A `kid` is printed in every token's header: short, and nothing JSON would escape. */
const KID = /^[A-Za-z0-9._-]{1,64}$/;

const keyEntry = z
  .object({
    kid: z.string().regex(KID, "kid: 1 to 64 of A-Z a-z 0-9 . _ -"),
    alg: z.enum(["ES256", "EdDSA"]),
    state: z.enum(["active", "verify-only"]),
    privateKeyPem: z.string().min(1).optional(),
    publicKeyPem: z.string().min(1).optional(),
  })
  .strict()
  .refine((k) => k.privateKeyPem !== undefined || k.publicKeyPem !== undefined, {
    message: "a key needs privateKeyPem (or, verify-only, publicKeyPem)",
  })
  .refine((k) => k.state !== "active" || k.privateKeyPem !== undefined, {
    message: "the active key needs privateKeyPem: it signs",
  });

/** One entry of `TOKEN_SIGNING_KEYS` (and of DATA_DIR/secrets.json's `tokenSigningKeys`). */
export type SigningKeyInput = z.infer<typeof keyEntry>;

export const signingKeyList = z.array(keyEntry).min(1, "at least one key");

/** A public key as the JWKS lists it (RFC 7517; EC per RFC 7518, OKP per RFC 8037). */
export type PublicJwk =
  | { kty: "EC"; crv: "P-256"; x: string; y: string; kid: string; alg: "ES256"; use: "sig" }
  | { kty: "OKP"; crv: "Ed25519"; x: string; kid: string; alg: "EdDSA"; use: "sig" };

export interface JsonWebKeySet {
  keys: PublicJwk[];
}

export interface SigningKey {
  kid: string;
  alg: AsymmetricAlgorithm;
  state: "active" | "verify-only";
  /** Present on the active key; a verify-only key may have one too (it is not used). */
  privateKey: KeyObject | undefined;
  publicKey: KeyObject;
  jwk: PublicJwk;
}

export interface SigningKeySet {
  alg: AsymmetricAlgorithm;
  active: SigningKey & { privateKey: KeyObject };
  /** Every key, the active one first, by the order given after it. */
  keys: readonly SigningKey[];
}

/** The key type node:crypto names for each algorithm's curve. */
const KEY_TYPE = { ES256: "ec", EdDSA: "ed25519" } as const;

function checkCurve(key: KeyObject, alg: AsymmetricAlgorithm, kid: string, half: string): void {
  const ok =
    alg === "ES256"
      ? key.asymmetricKeyType === "ec" && key.asymmetricKeyDetails?.namedCurve === "prime256v1"
      : key.asymmetricKeyType === "ed25519";
  if (!ok) {
    const found = key.asymmetricKeyType === "ec" ? `ec ${key.asymmetricKeyDetails?.namedCurve}` : key.asymmetricKeyType;
    throw new Error(`key ${kid}: ${alg} needs ${alg === "ES256" ? "a P-256 EC" : "an Ed25519"} ${half}, not ${found}`);
  }
}

function jwkOf(publicKey: KeyObject, kid: string, alg: AsymmetricAlgorithm): PublicJwk {
  const jwk = publicKey.export({ format: "jwk" });
  if (alg === "ES256") {
    return { kty: "EC", crv: "P-256", x: jwk.x as string, y: jwk.y as string, kid, alg, use: "sig" };
  }
  return { kty: "OKP", crv: "Ed25519", x: jwk.x as string, kid, alg, use: "sig" };
}

function keyOf(input: SigningKeyInput): SigningKey {
  const { kid, alg, state } = input;
  let privateKey: KeyObject | undefined;
  let publicKey: KeyObject;
  try {
    privateKey = input.privateKeyPem === undefined ? undefined : createPrivateKey(input.privateKeyPem);
  } catch (err) {
    throw new Error(`key ${kid}: privateKeyPem is not a private key in PEM (${(err as Error).message})`);
  }
  if (privateKey) checkCurve(privateKey, alg, kid, "private key");
  try {
    publicKey =
      input.publicKeyPem === undefined ? createPublicKey(privateKey as KeyObject) : createPublicKey(input.publicKeyPem);
  } catch (err) {
    throw new Error(`key ${kid}: publicKeyPem is not a public key in PEM (${(err as Error).message})`);
  }
  checkCurve(publicKey, alg, kid, "public key");
  const jwk = jwkOf(publicKey, kid, alg);
  if (privateKey && input.publicKeyPem !== undefined) {
    const derived = jwkOf(createPublicKey(privateKey), kid, alg);
    if (JSON.stringify(derived) !== JSON.stringify(jwk))
      throw new Error(`key ${kid}: publicKeyPem is not privateKeyPem's`);
  }
  return { kid, alg, state, privateKey, publicKey, jwk };
}

/**
 * The key set, checked: one active key (of `alg` when given), distinct kids, each key of its
 * algorithm's curve. Throws an Error naming the key at fault.
 */
export function loadSigningKeys(inputs: readonly SigningKeyInput[], alg?: AsymmetricAlgorithm): SigningKeySet {
  const parsed = signingKeyList.safeParse(inputs);
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((i) => `${i.path.join(".") || "keys"}: ${i.message}`).join("; "));
  }
  const kids = new Set<string>();
  for (const k of parsed.data) {
    if (kids.has(k.kid)) throw new Error(`key ${k.kid}: two keys with one kid`);
    kids.add(k.kid);
  }
  const active = parsed.data.filter((k) => k.state === "active");
  if (active.length !== 1) throw new Error(`exactly one key must be active (found ${active.length})`);
  const first = active[0] as SigningKeyInput;
  if (alg !== undefined && first.alg !== alg) {
    throw new Error(`the active key ${first.kid} is ${first.alg}, not ${alg} (TOKEN_ALG)`);
  }
  const keys = [first, ...parsed.data.filter((k) => k !== first)].map(keyOf);
  return { alg: first.alg, active: keys[0] as SigningKeySet["active"], keys };
}

/** `TOKEN_SIGNING_KEYS`' text: a JSON array of keys. Throws on anything else. */
export function parseSigningKeys(text: string): SigningKeyInput[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`not JSON (${(err as Error).message})`);
  }
  const parsed = signingKeyList.safeParse(value);
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((i) => `${i.path.join(".") || "keys"}: ${i.message}`).join("; "));
  }
  return parsed.data;
}

/** A new active key of `alg`, its private key in PKCS#8 PEM (what a dev start keeps in DATA_DIR). */
export function generateSigningKey(alg: AsymmetricAlgorithm, kid?: string): SigningKeyInput {
  const { privateKey } =
    KEY_TYPE[alg] === "ec" ? generateKeyPairSync("ec", { namedCurve: "P-256" }) : generateKeyPairSync("ed25519");
  return {
    kid: kid ?? `${alg.toLowerCase()}-${randomBytes(6).toString("hex")}`,
    alg,
    state: "active",
    privateKeyPem: privateKey.export({ format: "pem", type: "pkcs8" }) as string,
  };
}

/** The JWKS of a key set (none for HS256: nothing a verifier could use). */
export function jwksOf(keys: SigningKeySet | undefined): JsonWebKeySet {
  return { keys: keys ? keys.keys.map((k) => k.jwk) : [] };
}
