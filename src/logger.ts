import { type DestinationStream, type Logger, pino } from "pino";

export type { Logger };

export type LogFormat = "json" | "pretty";

/**
 * JSON lines for log stores, readable lines for a person at a terminal: `pretty` only when the
 * output is a terminal and the process is not in production (LOG_FORMAT=json or pretty decides
 * otherwise). A container's stdout is no terminal, so it logs JSON without being told.
 */
export function chooseLogFormat(options: {
  setting: "auto" | LogFormat;
  isTTY: boolean;
  production: boolean;
}): LogFormat {
  if (options.setting !== "auto") return options.setting;
  return options.isTTY && !options.production ? "pretty" : "json";
}

/**
 * The one logger. Children carry the request id (per request) or the job id (per job).
 * Secrets that might ride along in a logged object are redacted by path.
 */
export function createLogger(options: {
  level: string;
  name?: string;
  /** Default json. */
  format?: LogFormat;
  /** Default stdout. */
  destination?: { write(line: string): unknown };
}): Logger {
  const pinoOptions = {
    name: options.name ?? "gateway",
    level: options.level,
    redact: {
      paths: [
        "req.headers.authorization",
        'req.headers["x-load-test-token"]',
        "headers.authorization",
        "*.accessToken",
        "*.queueToken",
        "*.paymentToken",
        "adminToken",
        "gatewaySecret",
        "config.adminToken",
        "config.gatewaySecret",
        "loadTestToken",
        "config.loadTestToken",
        // token signing keys (TOKEN_SIGNING_KEYS): a key, a list of them, or the config holding it
        "privateKeyPem",
        "*.privateKeyPem",
        "[*].privateKeyPem",
        "*[*].privateKeyPem",
        "config.tokens.signingKeys[*].privateKeyPem",
        "tokens.signingKeys[*].privateKeyPem",
      ],
      censor: "[redacted]",
    },
  };
  if (options.format === "pretty") {
    const out = options.destination ?? process.stdout;
    const colors = options.destination === undefined && process.stdout.isTTY === true;
    const stream: DestinationStream = { write: (line: string) => void out.write(prettyLine(line, colors)) };
    return pino(pinoOptions, stream);
  }
  return options.destination ? pino(pinoOptions, options.destination as DestinationStream) : pino(pinoOptions);
}

const LEVELS: Record<number, { label: string; color: string }> = {
  10: { label: "TRACE", color: "90" },
  20: { label: "DEBUG", color: "36" },
  30: { label: "INFO ", color: "32" },
  40: { label: "WARN ", color: "33" },
  50: { label: "ERROR", color: "31" },
  60: { label: "FATAL", color: "41;97" },
};

/** Fields every line has, or that the layout shows in its own place. */
const OMITTED = new Set(["level", "time", "pid", "hostname", "name", "msg", "err"]);

/**
 * One pino JSON line as `12:03:04.567 INFO  msg key=value ...`, the error's stack under it. A line
 * that is not JSON passes unchanged. Built in, since pino-pretty is not a dependency.
 */
export function prettyLine(line: string, colors = false): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const paint = (code: string, text: string) => (colors ? `\u001b[${code}m${text}\u001b[0m` : text);
  const level = LEVELS[entry.level as number] ?? { label: String(entry.level).padEnd(5), color: "0" };
  const time = typeof entry.time === "number" ? new Date(entry.time).toISOString().slice(11, 23) : "";
  const name = entry.name && entry.name !== "gateway" ? `${paint("90", `[${String(entry.name)}]`)} ` : "";
  const fields = Object.entries(entry)
    .filter(([k]) => !OMITTED.has(k))
    .map(([k, v]) => `${paint("90", `${k}=`)}${typeof v === "string" ? v : JSON.stringify(v)}`);
  let out = `${paint("90", time)} ${paint(level.color, level.label)} ${name}${String(entry.msg ?? "")}`;
  if (fields.length > 0) out += ` ${fields.join(" ")}`;
  const err = entry.err as { stack?: string; message?: string } | undefined;
  if (err) out += `\n    ${(err.stack ?? err.message ?? JSON.stringify(err)).split("\n").join("\n    ")}`;
  return `${out}\n`;
}
