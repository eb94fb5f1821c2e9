/**
 * A child process's V8, through the inspector it opens with `--inspect=127.0.0.1:0`: a full
 * garbage collection, then what the heap holds. A memory bound on RSS alone measures when V8 last
 * collected as much as what the process keeps; after a forced collection the heap's used bytes are
 * what is live, so growth there is a leak and not a lazy collector.
 *
 * The inspector speaks the Chrome DevTools protocol over a WebSocket. Node 20 has no WebSocket
 * client and the project takes no dependency for one test helper, so this is the protocol's small
 * part the two calls need (RFC 6455: the upgrade, masked text frames out, unmasked frames in).
 */
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";

/** The address the child prints on stderr: `Debugger listening on ws://127.0.0.1:PORT/UUID`. */
export function inspectorUrlOf(logs: string[]): string | undefined {
  for (const line of logs) {
    const m = /Debugger listening on (ws:\/\/[^\s]+)/.exec(line);
    if (m) return m[1];
  }
  return undefined;
}

export interface Inspector {
  /** HeapProfiler.collectGarbage, twice (the second reclaims what the first's finalizers freed). */
  collectGarbage(): Promise<void>;
  /** process.memoryUsage() of the inspected process. */
  memoryUsage(): Promise<NodeJS.MemoryUsage>;
  close(): void;
}

export async function connectInspector(wsUrl: string): Promise<Inspector> {
  const url = new URL(wsUrl);
  const socket: Socket = connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  const key = randomBytes(16).toString("base64");
  socket.write(
    `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );

  let buffer = Buffer.alloc(0);
  let upgraded = false;
  let nextId = 1;
  const waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let upgradedResolve: () => void = () => {};
  let upgradedReject: (e: Error) => void = () => {};
  const upgradeDone = new Promise<void>((resolve, reject) => {
    upgradedResolve = resolve;
    upgradedReject = reject;
  });

  const onMessage = (text: string) => {
    const msg = JSON.parse(text) as { id?: number; result?: unknown; error?: { message: string } };
    if (msg.id === undefined) return; // an event
    const w = waiting.get(msg.id);
    if (!w) return;
    waiting.delete(msg.id);
    if (msg.error) w.reject(new Error(msg.error.message));
    else w.resolve(msg.result);
  };

  let fragments: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    if (!upgraded) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buffer.subarray(0, end).toString();
      if (!head.startsWith("HTTP/1.1 101")) {
        upgradedReject(new Error(`the inspector refused the upgrade: ${head.split("\r\n")[0]}`));
        return;
      }
      upgraded = true;
      buffer = buffer.subarray(end + 4);
      upgradedResolve();
    }
    for (;;) {
      if (buffer.length < 2) return;
      const fin = (buffer[0]! & 0x80) !== 0;
      const opcode = buffer[0]! & 0x0f;
      let length = buffer[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buffer.length < 4) return;
        length = buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buffer.length < 10) return;
        length = Number(buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (buffer.length < offset + length) return;
      const payload = buffer.subarray(offset, offset + length);
      buffer = buffer.subarray(offset + length);
      if (opcode === 0x1 || opcode === 0x0) {
        fragments.push(payload);
        if (fin) {
          onMessage(Buffer.concat(fragments).toString("utf8"));
          fragments = [];
        }
      } else if (opcode === 0x8) {
        socket.end();
        return;
      }
    }
  });
  const failAll = (err: Error) => {
    upgradedReject(err);
    for (const w of waiting.values()) w.reject(err);
    waiting.clear();
  };
  socket.on("error", failAll);
  socket.on("close", () => failAll(new Error("the inspector closed the connection")));
  await upgradeDone;

  const send = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      const payload = Buffer.from(JSON.stringify({ id, method, params }));
      const mask = randomBytes(4);
      const header =
        payload.length < 126
          ? Buffer.from([0x81, 0x80 | payload.length])
          : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
      const masked = Buffer.alloc(payload.length);
      for (let i = 0; i < payload.length; i++) masked[i] = payload[i]! ^ mask[i % 4]!;
      socket.write(Buffer.concat([header, mask, masked]));
    });

  return {
    async collectGarbage() {
      await send("HeapProfiler.collectGarbage");
      await send("HeapProfiler.collectGarbage");
    },
    async memoryUsage() {
      const result = (await send("Runtime.evaluate", {
        expression: "JSON.stringify(process.memoryUsage())",
        returnByValue: true,
      })) as { result: { value: string } };
      return JSON.parse(result.result.value) as NodeJS.MemoryUsage;
    },
    close() {
      socket.destroy();
    },
  };
}
