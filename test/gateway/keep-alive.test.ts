/**
 * Idle keep-alive connections: a client (a fan polling at the suggested interval, a load
 * balancer's connection pool) reuses a socket that sat idle for a while and POSTs a hold on it.
 * The server must not have closed that socket under it: a POST is not safely retried, so EOF
 * or a reset there is a failed hold. Node's default keep-alive timeout is 5 s; the idle time here
 * (6 s) is longer than that and far shorter than any load balancer's idle timeout.
 */
import { request as httpRequest, Agent } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AdmittedFan,
  admitFans,
  createTable,
  type Gateway,
  listen,
  putEvent,
  startGateway,
  uniqueId,
} from "./harness.js";

const IDLE_MS = 6_000;

let gw: Gateway;
let server: Awaited<ReturnType<typeof listen>>;
const eventId = uniqueId("ka");
let fans: AdmittedFan[];

beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
  // The harness serves the app with listenApp's defaults: the ones production uses.
  server = await listen(gw);
  expect((await putEvent(gw, eventId)).status).toBe(201);
  fans = await admitFans(gw, eventId, ["kafan1", "kafan2"]);
}, 120_000);

afterAll(async () => {
  await server?.close();
  await gw?.close();
});

const idle = () => new Promise((resolve) => setTimeout(resolve, IDLE_MS));

// The two idle at the same time: each on a connection, a fan and a seat of its own.
describe.concurrent("an idle keep-alive connection", () => {
  it("node:http keep-alive agent: GET, idle 6 s, POST a hold on the same socket: 201", async ({ expect }) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const url = new URL(server.url);
    const used: Socket[] = [];
    const call = (method: string, path: string, token?: string, body?: unknown) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const payload = body === undefined ? undefined : JSON.stringify(body);
        const req = httpRequest(
          {
            agent,
            host: url.hostname,
            port: url.port,
            method,
            path,
            headers: {
              ...(payload ? { "content-type": "application/json" } : {}),
              ...(token ? { authorization: `Bearer ${token}` } : {}),
            },
          },
          (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (chunk: string) => {
              text += chunk;
            });
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
            res.on("error", reject);
          },
        );
        req.on("socket", (socket) => used.push(socket));
        req.on("error", reject);
        req.end(payload);
      });
    try {
      const fan = fans[0]!;
      expect((await call("GET", `/v1/events/${eventId}/seatmap`)).status).toBe(200);
      await idle();
      const hold = await call("POST", `/v1/events/${eventId}/holds`, fan.accessToken, { seats: ["A-1-1"] });
      expect(hold.status, hold.body).toBe(201);
      // Reused, not quietly replaced: a server that closed the idle socket shows up here as a
      // second socket (the agent saw the close first) or, in the race, as a reset of the POST.
      expect(used).toHaveLength(2);
      expect(used[1]).toBe(used[0]);
    } finally {
      agent.destroy();
    }
  });

  it("raw socket: GET, idle 6 s, POST a hold on the same connection: answered, not EOF", async ({ expect }) => {
    const fan = fans[1]!;
    const url = new URL(server.url);
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    let received = "";
    let ended = false;
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      received += chunk;
    });
    socket.on("end", () => {
      ended = true;
    });
    socket.on("error", () => {});
    /** Resolves with the text of the `n`th complete response, or with what there was at EOF. */
    const responses = (n: number) =>
      new Promise<string>((resolve) => {
        const check = () => {
          const parts = received.split("HTTP/1.1 ").slice(1);
          const complete = parts.filter((p) => {
            const [head = "", body = ""] = p.split("\r\n\r\n");
            const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? Number.NaN);
            return Buffer.byteLength(body) >= length;
          });
          if (complete.length >= n || ended) {
            socket.off("data", check);
            socket.off("end", check);
            resolve(parts[n - 1] ?? `(EOF after ${parts.length} responses)`);
          }
        };
        socket.on("data", check);
        socket.on("end", check);
        check();
      });
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once("connect", resolve);
        socket.once("error", reject);
      });
      socket.write(`GET /v1/events/${eventId}/seatmap HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
      expect(await responses(1)).toMatch(/^200 /);
      await idle();
      expect(ended).toBe(false);
      const body = JSON.stringify({ seats: ["A-1-2"] });
      socket.write(
        `POST /v1/events/${eventId}/holds HTTP/1.1\r\nHost: ${url.host}\r\n` +
          `Authorization: Bearer ${fan.accessToken}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      const answer = await responses(2);
      expect(answer).toMatch(/^201 /);
      expect(answer).toContain('"seats":["A-1-2"]');
    } finally {
      socket.destroy();
    }
  });
});
