/** One real HTTP exchange over node:http, its bytes as they crossed the wire (nothing decompressed). */
import { request as httpRequest } from "node:http";

export interface Exchange {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export function exchange(
  url: string,
  headers: Record<string, string> = {},
  method = "GET",
  body?: string | Buffer,
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers, method }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}
