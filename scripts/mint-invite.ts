/**
 * `npm run mint-invite -- --event <id> --identity <who> [--ttl <seconds>]`: signs an invite token
 * (src/waiting-room/invites.ts, docs/waiting-room.md "Invite tokens") the way an operator's own
 * system would, and prints it. The fan page takes it as `?invite=<token>`.
 *
 * The key: INVITE_SECRET (HS256), or INVITE_PRIVATE_KEY, an Ed25519 private key in PEM (EdDSA; the
 * gateway then checks with the matching INVITE_PUBLIC_KEY). `--generate-key` prints a new Ed25519
 * key pair instead (PEM), for trying EdDSA out.
 *
 * Exit codes: 0 printed; 2 bad usage or no key.
 */
import { generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { EVENT_ID_PATTERN } from "../src/waiting-room/keys.js";
import { MAX_INVITE_LIFETIME_SECONDS, mintInvite } from "../src/waiting-room/invites.js";

const USAGE = `usage: npm run mint-invite -- --event <eventId> --identity <identity> [--ttl <seconds>]
       npm run mint-invite -- --generate-key

  key: INVITE_SECRET (HS256) or INVITE_PRIVATE_KEY (Ed25519 private key, PEM or a file's path; EdDSA)`;

function fail(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    event: { type: "string" },
    identity: { type: "string" },
    ttl: { type: "string", default: "3600" },
    "generate-key": { type: "boolean", default: false },
  },
});

if (values["generate-key"]) {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  process.stdout.write(
    `# INVITE_PRIVATE_KEY (the operator's system keeps it):\n${privateKey.export({ type: "pkcs8", format: "pem" })}` +
      `# INVITE_PUBLIC_KEY (the gateway's setting):\n${publicKey.export({ type: "spki", format: "pem" })}`,
  );
  process.exit(0);
}

const eventId = values.event ?? fail("--event is required");
if (!EVENT_ID_PATTERN.test(eventId)) fail(`--event: must match ${EVENT_ID_PATTERN}`);
const identity = values.identity ?? fail("--identity is required");
if (identity.length === 0 || identity.length > 128) fail("--identity: 1..128 characters");
const ttl = Number(values.ttl);
if (!Number.isInteger(ttl) || ttl <= 0 || ttl > MAX_INVITE_LIFETIME_SECONDS) {
  fail(`--ttl: a whole number of seconds, 1..${MAX_INVITE_LIFETIME_SECONDS} (the gateway refuses a later exp)`);
}
const exp = Math.floor(Date.now() / 1000) + ttl;

const secret = process.env.INVITE_SECRET;
const privateKey = process.env.INVITE_PRIVATE_KEY;
let token: string;
if (privateKey) {
  const pem = privateKey.trim().startsWith("-----") ? privateKey : readFileSync(privateKey, "utf8");
  token = mintInvite({ eventId, identity, exp }, { privateKey: pem });
} else if (secret) {
  if (secret.length < 32) fail("INVITE_SECRET: at least 32 characters");
  token = mintInvite({ eventId, identity, exp }, { secret });
} else {
  fail("set INVITE_SECRET or INVITE_PRIVATE_KEY");
}
process.stdout.write(`${token}\n`);
