/**
 * A TCP proxy in front of a Redis that can freeze the connections it carries: their sockets stay
 * open and nothing more passes either way, as when the far side of a connection vanished without a
 * reset (a failed-over master behind a load balancer, a dropped route). A client on a frozen
 * connection sees no error and no close; its commands never answer. Connections opened after
 * `freeze()` pass normally.
 */
import { createServer, type Server, type Socket, connect } from "node:net";

export interface FreezingProxy {
  url: string;
  /** Freezes every connection open now. */
  freeze(): void;
  /** How many connections are frozen. */
  frozen(): number;
  close(): Promise<void>;
}

export async function freezingProxy(target: { host: string; port: number }): Promise<FreezingProxy> {
  const pairs = new Set<{ client: Socket; upstream: Socket; frozen: boolean }>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    const pair = { client, upstream, frozen: false };
    pairs.add(pair);
    client.on("data", (chunk) => {
      if (!pair.frozen) upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (!pair.frozen) client.write(chunk);
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end);
    upstream.on("close", end);
    client.on("error", end);
    upstream.on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `redis://127.0.0.1:${port}`,
    freeze() {
      for (const pair of pairs) pair.frozen = true;
    },
    frozen: () => [...pairs].filter((p) => p.frozen).length,
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
