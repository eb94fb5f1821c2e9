/**
 * The driver's client given several gateways (`--base-url a,b,c`): each request goes to the next
 * URL in turn, over that URL's own sockets, so many requests in flight at once spread evenly;
 * a list with a bad URL in it is refused before anything is sent.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, targetUrls } from "../../load/driver/http.js";

const servers: Server[] = [];
const served: number[] = [];

beforeAll(async () => {
  for (let g = 0; g < 3; g++) {
    served.push(0);
    const server = createServer((_req, res) => {
      served[g]!++;
      // A little later, so that the requests really are in flight together.
      setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ g })), 20);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    servers.push(server);
  }
});

afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
});

describe("the driver's client on several gateways", () => {
  it("sends each request to the next gateway in turn, many in flight at once", async () => {
    const urls = servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`);
    const client = new Client(urls.join(","), 12);
    try {
      const replies = await Promise.all(
        Array.from({ length: 30 }, () => client.call<{ g: number }>("status", "GET", "/v1/events/e/queue/status")),
      );
      expect(replies.map((r) => r.status)).toEqual(Array(30).fill(200));
      expect(served).toEqual([10, 10, 10]);
      expect(client.perTarget).toEqual([10, 10, 10]);
      // One request to each in turn: the answers come from gateway 0, 1, 2, 0, ...
      const inTurn = await Promise.all([0, 1, 2].map(() => client.call<{ g: number }>("x", "GET", "/")));
      expect(inTurn.map((r) => r.body.g)).toEqual([0, 1, 2]);
      expect(client.requests).toBe(33);
    } finally {
      client.close();
    }
  });

  it("refuses a list with a URL it cannot speak to, and an empty one", () => {
    expect(targetUrls(" http://a:1 , http://b:2 ")).toEqual(["http://a:1", "http://b:2"]);
    expect(() => targetUrls("http://a:1,ftp://b:2")).toThrow(/unsupported protocol ftp:/);
    expect(() => targetUrls(" , ")).toThrow(/no base URL/);
  });
});
