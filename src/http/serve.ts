/**
 * Serves the app on a port with a listen backlog deep enough for an on-sale spike: Node's default
 * (511) makes the kernel drop the connections of a burst of fans arriving at once, which they see
 * as resets. The kernel caps it at net.core.somaxconn.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createAdaptorServer } from "@hono/node-server";

export const LISTEN_BACKLOG = 4_096;

export async function listenApp(options: {
  fetch: (request: Request) => Response | Promise<Response>;
  port: number;
  host: string;
}): Promise<{ server: Server; port: number }> {
  const server = createAdaptorServer({ fetch: options.fetch }) as Server;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: options.port, host: options.host, backlog: LISTEN_BACKLOG }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}
