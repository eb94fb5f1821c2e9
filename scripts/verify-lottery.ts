/**
 * npm run verify-lottery -- --gateway URL --event ID
 *
 * Fetches an event's published draw (commitment, seed, membership hash, beacon, membership),
 * recomputes M and the order (src/lottery/draw.ts), checks the commitment, and prints the first
 * ten positions and PASS or FAIL (exit code 0 or 1).
 */
import { parseArgs } from "node:util";
import { verifyRemoteDraw } from "../src/lottery/verify-remote.js";

const { values } = parseArgs({ options: { gateway: { type: "string" }, event: { type: "string" } } });
if (!values.gateway || !values.event) {
  console.error("usage: npm run verify-lottery -- --gateway URL --event ID");
  process.exit(2);
}

try {
  const check = await verifyRemoteDraw(values.gateway, values.event);
  console.log(`event       ${check.eventId}`);
  console.log(`commitment  ${check.commitment}`);
  console.log(`seed        ${check.seed}`);
  console.log(`membership  ${check.membershipHash} (${check.size} fans)`);
  console.log(`beacon      ${check.beacon || "(none)"}`);
  if (check.sealedOnly) console.log("            Redis lost the room: published as sealed in DynamoDB");
  for (const [name, ok] of Object.entries(check.checks)) console.log(`  ${ok ? "ok  " : "FAIL"} ${name}`);
  console.log("first positions (SHA-256 of the fan id):");
  for (const [i, entry] of check.first.entries()) console.log(`  ${String(i + 1).padStart(3)}  ${entry}`);
  if (check.firstMismatch > 0)
    console.log(`the published order departs from the draw at position ${check.firstMismatch}`);
  console.log(check.pass ? "PASS" : "FAIL");
  process.exit(check.pass ? 0 : 1);
} catch (err) {
  console.error(`cannot verify: ${(err as Error).message}`);
  process.exit(2);
}
