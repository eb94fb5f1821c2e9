/**
 * A request Node's parser refuses while the client is still sending it: a 1 MB Authorization
 * header with a 464 KB body, as test/chaos/fuzz.test.ts once sent to POST .../notify and got the
 * connection closed with no answer. The server answered 431 and then reset the connection while
 * the body was still arriving (the failed parser repeats its error on each later chunk, and that
 * second error destroyed the socket); a reset can erase the answer from the client's receive
 * buffer before it is read. A client that reads the answer only once it has sent its request
 * (most HTTP/1.1 clients) always lost it: its next write met the reset.
 *
 * The server here is listenApp (src/http/serve.ts) with an app that is never reached: no Redis or
 * DynamoDB is involved.
 */
import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { listenApp } from "../../src/http/serve.js";
import { encodeRequest } from "../chaos/support/http.js";

interface Served {
  port: number;
  /** The server's side of each connection, by the client's port. */
  serverSide: Map<number, Socket>;
  close(): Promise<void>;
}

const opened: Served[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});

async function serve(lingerMs?: number): Promise<Served> {
  const { server, port } = await listenApp({
    fetch: () => new Response("the app is not reached"),
    port: 0,
    host: "127.0.0.1",
    ...(lingerMs === undefined ? {} : { lingerMs }),
  });
  const serverSide = new Map<number, Socket>();
  server.on("connection", (socket: Socket) => serverSide.set(socket.remotePort ?? 0, socket));
  const served: Served = { port, serverSide, close: () => closeServer(server) };
  opened.push(served);
  return served;
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** The request fuzz.test.ts sent: its head (the 1 MB header included) and its body, apart. */
function oversizedRequest(): { head: Buffer; body: Buffer } {
  const body = Buffer.alloc(464 * 1024, "a");
  const whole = encodeRequest({
    method: "POST",
    target: "/v1/events/fuzz_evt/notify",
    headers: [
      ["Host", "127.0.0.1"],
      ["Content-Type", "application/json"],
      ["Authorization", `Bearer ${"x".repeat(1024 * 1024)}`],
    ],
    body,
  });
  return { head: whole.subarray(0, whole.length - body.length), body };
}

/** Resolves when `check` holds, polled; rejects after `ms`. */
async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function connected(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port }, () => resolve(socket));
    socket.once("error", reject);
  });
}

function written(socket: Socket, bytes: Buffer): Promise<Error | undefined> {
  return new Promise((resolve) => {
    socket.write(bytes, (err) => resolve(err ?? undefined));
  });
}

/** Everything the server sends until it closes its side; an error (a reset) is returned with it. */
function readToEnd(socket: Socket): Promise<{ bytes: Buffer; error?: string }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("error", (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    socket.once("end", () => resolve({ bytes: Buffer.concat(chunks) }));
    socket.once("close", () => resolve({ bytes: Buffer.concat(chunks), ...(error ? { error } : {}) }));
    socket.resume();
  });
}

function expect431(answer: Buffer): void {
  const text = answer.toString("latin1");
  const split = text.indexOf("\r\n\r\n");
  expect(text.slice(0, text.indexOf("\r\n"))).toBe("HTTP/1.1 431 Request Header Fields Too Large");
  expect(text.slice(0, split)).toMatch(/\r\nContent-Type: application\/json\r\n/);
  const body = JSON.parse(text.slice(split + 4)) as { error: { code: string; message: string; requestId: string } };
  expect(body.error.code).toBe("headers_too_large");
  expect(body.error.requestId).toBe(/\r\nX-Request-Id: ([^\r]+)\r\n/.exec(text)?.[1]);
}

/**
 * Sends the head, waits until the server has read all of it (or closed), sends the body, and only
 * then reads: a client that reads once its request is sent. The old server had reset the
 * connection by then, so the body's write failed and the answer was lost, every time.
 */
async function sendThenRead(served: Served): Promise<{ writeError?: string; answer: Buffer; error?: string }> {
  const { head, body } = oversizedRequest();
  const client = await connected(served.port);
  client.pause();
  const errors: string[] = [];
  client.on("error", (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
  void written(client, head);
  await until(() => served.serverSide.has(client.localPort ?? -1), 5_000, "the server accepted");
  const serverSocket = served.serverSide.get(client.localPort ?? -1)!;
  await until(
    () => serverSocket.destroyed || serverSocket.bytesRead >= head.length,
    10_000,
    "the server read the head or closed",
  );
  const writeError = await written(client, body);
  if (writeError) {
    client.destroy();
    return { writeError: (writeError as NodeJS.ErrnoException).code ?? writeError.message, answer: Buffer.alloc(0) };
  }
  const read = await readToEnd(client);
  client.end();
  return { answer: read.bytes, ...(read.error ? { error: read.error } : {}) };
}

describe("a request refused by the parser while its body is still coming (fuzz.test.ts's flake)", () => {
  it("a 1 MB header and a 464 KB body, read once sent: the 431 JSON answer arrives, not a reset", async () => {
    const served = await serve();
    // Several at once, as the fuzzer sends them.
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => sendThenRead(served)));
    for (const outcome of outcomes) {
      expect(outcome.writeError).toBeUndefined();
      expect(outcome.error).toBeUndefined();
      expect431(outcome.answer);
    }
  });

  it("the client's close after the answer ends the lingering at once", async () => {
    const served = await serve(60_000);
    const { head, body } = oversizedRequest();
    const client = await connected(served.port);
    const read = readToEnd(client);
    expect(await written(client, Buffer.concat([head, body]))).toBeUndefined();
    const { bytes, error } = await read;
    expect(error).toBeUndefined();
    expect431(bytes);
    const serverSocket = served.serverSide.get(client.localPort ?? -1)!;
    expect(serverSocket.closed).toBe(false);
    client.end();
    // Long before the 60 s linger: the server closes when the client does.
    await until(() => serverSocket.closed, 5_000, "the server closed its socket when the client did");
  });

  it("a client that half-closes after its request still reads the whole answer", async () => {
    const served = await serve(60_000);
    const { head, body } = oversizedRequest();
    const client = connect({ host: "127.0.0.1", port: served.port, allowHalfOpen: true });
    client.pause();
    await new Promise((resolve) => client.once("connect", resolve));
    client.end(Buffer.concat([head, body]));
    const { bytes, error } = await readToEnd(client);
    expect(error).toBeUndefined();
    expect431(bytes);
  });

  it("a client that sends on and never closes is cut off once the linger is over", async () => {
    const lingerMs = 300;
    const served = await serve(lingerMs);
    const { head } = oversizedRequest();
    // Half-open allowed: the client keeps its side open after the server's FIN, as a client
    // still uploading does.
    const client = connect({ host: "127.0.0.1", port: served.port, allowHalfOpen: true });
    client.on("error", () => {});
    const started = performance.now();
    const answer = readToEnd(client);
    const closed = new Promise((resolve) => client.once("close", resolve));
    await written(client, head);
    // More of a body that never ends, until the server closes.
    const drip = setInterval(() => {
      if (!client.destroyed) client.write(randomUUID());
    }, 20);
    expect431((await answer).bytes);
    await closed;
    clearInterval(drip);
    expect(performance.now() - started).toBeGreaterThanOrEqual(lingerMs - 10);
  });
});
