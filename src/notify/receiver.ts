/**
 * The simulated mail-or-push system: what `npm start` points NOTIFY_WEBHOOK_URL at when the
 * operator gave none. A small HTTP server on 127.0.0.1 that checks each batch's signature, drops
 * a batch it has seen (its Idempotency-Key), and logs who would be told, as a real receiver would
 * mail them. It keeps what it got, for the load kit and tests to read.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "../logger.js";
import { verifyWebhook } from "../payments/webhook.js";
import { NOTIFY_IDEMPOTENCY_HEADER, NOTIFY_SIGNATURE_HEADER, type SeatsBackPayload } from "./webhook.js";

export interface NotifyReceiver {
  url: string;
  /** Every batch accepted, first delivery only, in arrival order. */
  batches: Array<{ idempotencyKey: string; payload: SeatsBackPayload }>;
  close(): Promise<void>;
}

const MAX_BODY = 1024 * 1024;

export async function startNotifyReceiver(options: {
  secret: string;
  logger: Logger;
  port?: number;
  host?: string;
}): Promise<NotifyReceiver> {
  const seen = new Set<string>();
  const batches: NotifyReceiver["batches"] = [];
  const log = options.logger.child({ component: "notify-receiver" });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const answer = (status: number, text: string) => {
        res.writeHead(status, { "content-type": "text/plain" });
        res.end(text);
      };
      if (req.method !== "POST" || size > MAX_BODY) return answer(400, "bad request");
      const verified = verifyWebhook(
        options.secret,
        body,
        req.headers[NOTIFY_SIGNATURE_HEADER.toLowerCase()] as string,
      );
      if (!verified.ok) return answer(401, verified.reason);
      const key = req.headers[NOTIFY_IDEMPOTENCY_HEADER.toLowerCase()];
      if (typeof key !== "string" || key.length === 0) return answer(400, "no idempotency key");
      if (seen.has(key)) return answer(200, "duplicate");
      let payload: SeatsBackPayload;
      try {
        payload = JSON.parse(body.toString("utf8")) as SeatsBackPayload;
      } catch {
        return answer(400, "bad json");
      }
      seen.add(key);
      batches.push({ idempotencyKey: key, payload });
      log.info(
        { eventId: payload.eventId, seatsReturned: payload.seatsReturned, fans: payload.fans.map((f) => f.contact) },
        `seats back: would tell ${payload.fans.length} fan(s)`,
      );
      answer(200, "ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${options.host ?? "127.0.0.1"}:${port}/notify`,
    batches,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
