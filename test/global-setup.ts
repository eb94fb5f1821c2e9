/**
 * Gives every test a Redis URL and a DynamoDB endpoint, in this order of preference:
 *   1. REDIS_URL / DYNAMODB_ENDPOINT from the environment;
 *   2. containers (testcontainers) when a Docker engine answers;
 *   3. local processes: a redis-server from the PATH and the local DynamoDB, each on a free port.
 * When none can be had the run fails with a message that says how to provide one. No test skips
 * because a server is missing.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import "./support/provided.js";
import { spawnLocalDynamoDB } from "../src/local/dynamodb.js";
import { spawnRedis } from "../src/local/redis.js";
import { formatReport, readReport } from "./chaos/support/report.js";

type Stop = () => Promise<void>;

function dockerMayAnswer(): boolean {
  if (process.env.TESTCONTAINERS === "0") return false;
  return Boolean(process.env.DOCKER_HOST) || existsSync("/var/run/docker.sock");
}

async function fromContainers(): Promise<{ redisUrl?: string; dynamoEndpoint?: string; stop: Stop } | null> {
  if (!dockerMayAnswer()) return null;
  try {
    const { GenericContainer, getContainerRuntimeClient } = await import("testcontainers");
    await getContainerRuntimeClient();
    const redis = await new GenericContainer("redis:7-alpine").withExposedPorts(6379).start();
    const dynamo = await new GenericContainer("amazon/dynamodb-local:latest")
      .withExposedPorts(8000)
      .withCommand(["-jar", "DynamoDBLocal.jar", "-inMemory", "-sharedDb"])
      .start();
    return {
      redisUrl: `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`,
      dynamoEndpoint: `http://${dynamo.getHost()}:${dynamo.getMappedPort(8000)}`,
      stop: async () => {
        await Promise.allSettled([redis.stop(), dynamo.stop()]);
      },
    };
  } catch {
    return null;
  }
}

export default async function setup(project: TestProject): Promise<Stop> {
  const stops: Stop[] = [];
  let redisUrl = process.env.REDIS_URL;
  let dynamoEndpoint = process.env.DYNAMODB_ENDPOINT;

  if (!redisUrl || !dynamoEndpoint) {
    const containers = await fromContainers();
    if (containers) {
      stops.push(containers.stop);
      redisUrl ??= containers.redisUrl;
      dynamoEndpoint ??= containers.dynamoEndpoint;
    }
  }

  if (!redisUrl) {
    try {
      const redis = await spawnRedis();
      stops.push(redis.close);
      redisUrl = redis.url;
    } catch (err) {
      throw new Error(
        `No Redis for the tests: ${(err as Error).message}.\n` +
          "Provide one: set REDIS_URL=redis://host:port, or run a Docker engine (testcontainers), " +
          "or put redis-server on the PATH (Debian: apt-get install -y redis-server).",
      );
    }
  }

  if (!dynamoEndpoint) {
    try {
      const dynamo = await spawnLocalDynamoDB({ port: 0 });
      stops.push(dynamo.close);
      dynamoEndpoint = dynamo.endpoint;
    } catch (err) {
      throw new Error(
        `No DynamoDB endpoint for the tests: ${(err as Error).message}.\n` +
          "Provide one: set DYNAMODB_ENDPOINT=http://host:port (DynamoDB Local, AWS), " +
          "or run `npm ci` so the patched local DynamoDB (dynalite) is installed.",
      );
    }
  }

  project.provide("redisUrl", redisUrl);
  project.provide("dynamoEndpoint", dynamoEndpoint);
  // Child processes started by tests (gateways, workers) find them here too.
  process.env.TEST_REDIS_URL = redisUrl;
  process.env.TEST_DYNAMODB_ENDPOINT = dynamoEndpoint;

  mkdirSync("test-artifacts/chaos", { recursive: true });
  const chaosReportFile = join("test-artifacts/chaos", `report-${process.pid}-${Date.now()}.jsonl`);
  project.provide("chaosReportFile", chaosReportFile);

  return async () => {
    for (const stop of stops.reverse()) await stop();
    const rows = readReport(chaosReportFile);
    if (rows.length > 0) {
      console.log(
        `\nChaos and abuse report (${process.env.CHAOS === "full" ? "full" : "short"} run)\n${formatReport(rows)}\n`,
      );
    }
  };
}
