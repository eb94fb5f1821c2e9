/**
 * The DynamoDB clients, built once by main.ts (or a test) and handed to whatever needs them.
 * A loopback endpoint (the local DynamoDB) gets static placeholder credentials, since it checks
 * none; any other endpoint uses the SDK's default credential chain.
 */
import { Agent } from "node:http";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { NodeHttpHandler } from "@smithy/node-http-handler";

export interface DynamoClientOptions {
  endpoint?: string | undefined;
  region: string;
  /** Sockets per client; the SDK's default of 50 would queue a spike behind a few requests. */
  maxSockets?: number;
  requestTimeoutMs?: number;
  /**
   * How long a request may wait for its socket: queued behind `maxSockets` busy ones, then the
   * TCP handshake (the SDK counts both). Default 10 s.
   */
  connectionTimeoutMs?: number;
  maxAttempts?: number;
}

export function isLoopbackEndpoint(endpoint: string): boolean {
  const host = new URL(endpoint).hostname;
  return host === "localhost" || host === "[::1]" || host === "::1" || host.startsWith("127.");
}

export function createDynamoClient(options: DynamoClientOptions): DynamoDBClient {
  const local = options.endpoint !== undefined && isLoopbackEndpoint(options.endpoint);
  const maxSockets = options.maxSockets ?? 512;
  return new DynamoDBClient({
    region: options.region,
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    ...(local ? { credentials: { accessKeyId: "local", secretAccessKey: "local" } } : {}),
    maxAttempts: options.maxAttempts ?? 3,
    requestHandler: new NodeHttpHandler({
      // Keep every socket of a burst for the next one instead of closing all but 256 of them.
      httpAgent: new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets }),
      // The SDK counts time spent queued for a free socket against connectionTimeout, so it must
      // cover a spike deeper than maxSockets, not just a TCP handshake.
      connectionTimeout: options.connectionTimeoutMs ?? 10_000,
      requestTimeout: options.requestTimeoutMs ?? 5_000,
      // Without this an overdue request only logs a warning; a claim must fail fast with 503.
      throwOnRequestTimeout: true,
    }),
  });
}

export function createDocumentClient(client: DynamoDBClient): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true },
  });
}
