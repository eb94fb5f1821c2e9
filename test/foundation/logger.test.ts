import { describe, expect, it } from "vitest";
import { chooseLogFormat, createLogger, prettyLine } from "../../src/logger.js";

function capture(format: "json" | "pretty") {
  const lines: string[] = [];
  const log = createLogger({ level: "info", format, destination: { write: (l: string) => lines.push(l) } });
  return { log, lines };
}

describe("log format", () => {
  it("is readable on a terminal outside production, JSON otherwise, unless LOG_FORMAT says", () => {
    expect(chooseLogFormat({ setting: "auto", isTTY: true, production: false })).toBe("pretty");
    expect(chooseLogFormat({ setting: "auto", isTTY: false, production: false })).toBe("json");
    expect(chooseLogFormat({ setting: "auto", isTTY: true, production: true })).toBe("json");
    expect(chooseLogFormat({ setting: "json", isTTY: true, production: false })).toBe("json");
    expect(chooseLogFormat({ setting: "pretty", isTTY: false, production: true })).toBe("pretty");
  });

  it("pretty: time, level, message and fields on one line, secrets still redacted, the stack below", () => {
    const { log, lines } = capture("pretty");
    log.info({ url: "http://localhost:8080", adminToken: "adm_secret", count: 3 }, "gateway listening");
    log.error({ err: new Error("boom") }, "job failed");
    expect(lines[0]).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} INFO {2}gateway listening url=http:\/\/localhost:8080 adminToken=\[redacted\] count=3\n$/,
    );
    expect(lines[0]).not.toContain("adm_secret");
    expect(lines[1]).toMatch(/ERROR job failed\n {4}Error: boom\n\s+at /);
    expect(lines[0]).not.toContain("{");
  });

  it("json: one JSON object a line, as log stores read it", () => {
    const { log, lines } = capture("json");
    log.warn({ queue: "sweeps" }, "worker error");
    const entry = JSON.parse(lines[0] ?? "") as Record<string, unknown>;
    expect(entry).toMatchObject({ level: 40, msg: "worker error", queue: "sweeps", name: "gateway" });
  });

  it("passes a line that is not JSON unchanged", () => {
    expect(prettyLine("plain text\n")).toBe("plain text\n");
  });
});
