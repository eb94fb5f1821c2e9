/** Stopping a server this process started (the local DynamoDB, a redis-server). */
import type { ChildProcess } from "node:child_process";

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the child has exited (at once if it had). */
export function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), graceMs).unref();
  });
}
