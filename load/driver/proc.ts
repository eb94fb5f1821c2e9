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

/** The machine's CPU time from /proc/stat, all cores added: busy and total, in ticks (undefined off Linux). */
export function machineCpuTicks(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0] ?? "";
    // cpu user nice system idle iowait irq softirq steal ...: idle and iowait are the idle time
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    if (f.length < 4 || f.some((x) => !Number.isFinite(x))) return undefined;
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total };
  } catch {
    return undefined;
  }
}
