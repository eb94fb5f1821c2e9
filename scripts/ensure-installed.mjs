// Runs before `npm start` and `npm test`: on a fresh clone (or after package-lock.json changed)
// it installs the locked dependencies, so the README's quickstart is exactly two commands.
// Plain JavaScript on purpose: it must run before anything is installed.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";

const lock = "package-lock.json";
const marker = "node_modules/.package-lock.json";
const fresh = existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs;
if (!fresh) {
  process.stderr.write("installing dependencies (npm ci)...\n");
  const r = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
