/** A process's CPU time from Linux /proc: the benches (scripts/lib/http-load.ts) and the driver's costs (costs.ts). */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

let clockTicks: number | undefined;
/** The kernel's clock ticks a second (the unit of /proc's CPU times), asked once. */
export function ticksPerSecond(): number {
  clockTicks ??= Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;
  return clockTicks;
}

/** User + system CPU of a process, in microseconds (Linux /proc; undefined elsewhere). */
export function processCpuMicros(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces): utime is the 14th, stime the 15th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks / ticksPerSecond()) * 1e6;
  } catch {
    return undefined;
  }
}
