import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("the embedded local DynamoDB", () => {
  it("exits when the process that started it is killed with SIGKILL (no orphan holding the port)", async () => {
    const parent = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "-e",
        'const { spawnLocalDynamoDB } = await import("./src/local/dynamodb.ts"); const db = await spawnLocalDynamoDB({ port: 0 }); console.log(JSON.stringify({ pid: db.child.pid })); setInterval(() => {}, 1000);',
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const childPid = await new Promise<number>((resolve, reject) => {
      createInterface({ input: parent.stdout! }).on("line", (line) => {
        const pid = (JSON.parse(line) as { pid?: number }).pid;
        if (pid) resolve(pid);
      });
      parent.once("exit", (code) => reject(new Error(`parent exited with ${code}`)));
    });
    expect(alive(childPid)).toBe(true);
    parent.kill("SIGKILL");
    await expect.poll(() => alive(childPid), { timeout: 10_000, interval: 100 }).toBe(false);
  });
});
