/**
 * Redis' MONITOR on a plain socket: every command the server runs, as it saw it. ioredis' own
 * `monitor()` (6.0.0) can take the first monitored lines for replies to its handshake and throw
 * "Command queue state error" out of its socket handler (an uncaught exception in a CI run); this
 * speaks the few lines of RESP MONITOR needs and nothing else.
 */
import { connect, type Socket } from "node:net";

export interface MonitoredCommand {
  /** The command and its arguments, unescaped. */
  args: string[];
  /** `lua` for a command a script ran, else the client's `host:port`. */
  source: string;
}

export interface RedisMonitor {
  on(listener: (command: MonitoredCommand) => void): void;
  close(): void;
}

/** One quoted argument of a MONITOR line, unescaped (Redis writes them with sdscatrepr). */
function unquote(quoted: string): string {
  return quoted.replace(/\\(x[0-9a-f]{2}|.)/g, (_, e: string) => {
    if (e.length === 3) return String.fromCharCode(Number.parseInt(e.slice(1), 16));
    return ({ n: "\n", r: "\r", t: "\t", a: "\x07", b: "\b" } as Record<string, string>)[e] ?? e;
  });
}

/** `+<time> [<db> <source>] "arg" "arg" ...` -> the command, or undefined for any other line. */
export function parseMonitorLine(line: string): MonitoredCommand | undefined {
  const head = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] /.exec(line);
  if (!head) return undefined;
  const args = [...line.slice(head[0].length).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => unquote(m[1] ?? ""));
  return { args, source: head[1] ?? "" };
}

/** Starts monitoring the Redis at `url`; resolves once the server said OK. */
export async function monitorRedis(url: string): Promise<RedisMonitor> {
  const { hostname, port, password } = new URL(url);
  const socket: Socket = connect(Number(port || 6379), hostname);
  const listeners: ((command: MonitoredCommand) => void)[] = [];
  let buffered = "";
  await new Promise<void>((resolve, reject) => {
    // AUTH's OK (with a password), then MONITOR's: monitoring from the last one on.
    let oksDue = password ? 2 : 1;
    socket.once("error", reject);
    socket.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("latin1");
      for (let end = buffered.indexOf("\r\n"); end >= 0; end = buffered.indexOf("\r\n")) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (oksDue > 0) {
          if (line !== "+OK") reject(new Error(`MONITOR: ${line}`));
          else if (--oksDue === 0) resolve();
          continue;
        }
        const command = parseMonitorLine(line);
        if (command) for (const listener of listeners) listener(command);
      }
    });
    socket.write(password ? `AUTH ${decodeURIComponent(password)}\r\nMONITOR\r\n` : "MONITOR\r\n");
  });
  return {
    on: (listener) => listeners.push(listener),
    close: () => socket.destroy(),
  };
}
