/**
 * The load driver's HTTP client reuses keep-alive sockets. It must close an idle one before the
 * server does, or a request handed that socket races the server's close and is counted as the
 * gateway's error (EOF, reset). Node's Agent does that (it closes an idle socket 1 s before the
 * `Keep-Alive: timeout=N` the server announces) only when the agent has a `timeout` of its own:
 * without one it keeps idle sockets forever and ignores the hint.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { Client } from "../../load/driver/http.js";

describe("load driver client", () => {
  it("closes an idle socket before the server's announced keep-alive timeout (Keep-Alive: timeout=3)", async () => {
    const server = createServer({ keepAliveTimeout: 3_000 }, (_req, res) => res.end("{}"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const client = new Client(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 1);
    try {
      const reply = await client.call("probe", "GET", "/");
      expect(reply.status).toBe(200);
      const idle = Object.values(client.agent.freeSockets).flat();
      expect(idle).toHaveLength(1);
      // The agent's own idle timer on the pooled socket: 1 s under the server's 3 s.
      expect(idle[0]?.timeout).toBe(2_000);
    } finally {
      client.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
