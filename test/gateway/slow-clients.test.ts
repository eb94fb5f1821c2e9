/**
 * A client that trickles its headers or never sends the body it announced is cut off with a JSON
 * 408 near the bound (README "Limits": headers within 20 s, the whole request within 30 s), not at
 * Node's next 30-second timeout check (src/http/serve.ts TIMEOUT_CHECK_INTERVAL_MS). The bounds are
 * shortened here (2 s, 3 s); the check interval is the production one.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenApp, TIMEOUT_CHECK_INTERVAL_MS } from "../../src/http/serve.js";

const HEADERS_MS = 2_000;
const REQUEST_MS = 3_000;
let server: Awaited<ReturnType<typeof listenApp>>["server"];
let port: number;

beforeAll(async () => {
  ({ server, port } = await listenApp({
    // Reads the whole body first, as the gateway's routes do.
    fetch: async (request) => new Response(await request.text()),
    port: 0,
    host: "127.0.0.1",
    headersTimeoutMs: HEADERS_MS,
    requestTimeoutMs: REQUEST_MS,
    lingerMs: 0,
  }));
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Sends `head`, then `drip` every 500 ms until the server answers; the answer and when it came. */
function slowClient(head: string, drip: string): Promise<{ response: string; afterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = connect(port, "127.0.0.1");
    let response = "";
    const timer = setInterval(() => socket.write(drip), 500);
    socket.on("data", (d: Buffer) => {
      response += d.toString("latin1");
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearInterval(timer);
      resolve({ response, afterMs: performance.now() - started });
    });
    socket.write(head);
    setTimeout(() => {
      socket.destroy();
      reject(new Error("no answer in 20 s"));
    }, 20_000);
  });
}

describe("slow clients", () => {
  it("headers trickled a line at a time: 408 request_timeout, JSON, within a check of the headers' bound", async () => {
    const { response, afterMs } = await slowClient("GET /anything HTTP/1.1\r\nHost: x\r\n", "x-a: b\r\n");
    expect(response).toMatch(/^HTTP\/1\.1 408 /);
    expect(response).toMatch(/content-type: application\/json/i);
    expect(response).toContain('"code":"request_timeout"');
    expect(afterMs).toBeGreaterThanOrEqual(HEADERS_MS - 50);
    // Node's own check every 30 s would answer at 30 s; every second, within the bound and a check
    // or two (slack for a loaded machine).
    expect(afterMs).toBeLessThan(HEADERS_MS + 2 * TIMEOUT_CHECK_INTERVAL_MS + 3_000);
  });

  it("a body announced and never sent: 408 within a check of the request's bound", async () => {
    const { response, afterMs } = await slowClient(
      "POST /anything HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
      " ",
    );
    expect(response).toMatch(/^HTTP\/1\.1 408 /);
    expect(afterMs).toBeGreaterThanOrEqual(REQUEST_MS - 50);
    expect(afterMs).toBeLessThan(REQUEST_MS + 2 * TIMEOUT_CHECK_INTERVAL_MS + 3_000);
  });
});
