/**
 * npm run verify-lottery -- --gateway URL --event ID [--commitment HEX]
 *
 * Fetches an event's published draw (commitment, seed, membership hash, beacon, membership),
 * recomputes M and the order (src/lottery/draw.ts), checks the seed against the commitment (the one
 * given with --commitment, as your fan page recorded it when you joined, else the one served now),
 * checks the drand beacon's BLS signature and round (src/lottery/drand.ts), and prints the first
 * ten positions and PASS or FAIL (exit code 0 or 1).
 */
import { parseArgs } from "node:util";
import { verifyRemoteDraw } from "../src/lottery/verify-remote.js";

const { values } = parseArgs({
  options: { gateway: { type: "string" }, event: { type: "string" }, commitment: { type: "string" } },
});
if (!values.gateway || !values.event) {
  console.error("usage: npm run verify-lottery -- --gateway URL --event ID [--commitment HEX]");
  process.exit(2);
}

try {
  const check = await verifyRemoteDraw(values.gateway, values.event, { commitment: values.commitment });
  console.log(`event       ${check.eventId}`);
  console.log(
    `commitment  ${check.commitment}${check.recordedCommitment ? "" : " (as served now: pass --commitment to check the one you recorded)"}`,
  );
  if (check.recordedCommitment)
    console.log(
      `  ${check.commitmentAsRecorded ? "ok  " : "FAIL"} the commitment served is the one recorded at join (${check.recordedCommitment})`,
    );
  console.log(`seed        ${check.seed}`);
  console.log(`membership  ${check.membershipHash} (${check.size} fans)`);
  console.log(`beacon      ${check.beacon || "(none)"}`);
  const b = check.beaconCheck;
  if (b) {
    console.log(
      `            drand ${b.knownAs ?? `chain ${b.chainHash} (not a League of Entropy chain: check its key yourself)`}${b.round ? `, round ${b.round}` : ""}`,
    );
    console.log(
      `  ${b.ok ? "ok  " : "FAIL"} beacon: the close's drand round, its BLS signature under the chain's key, B = SHA-256(signature)${b.problem ? `: ${b.problem}` : ""}`,
    );
  }
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
