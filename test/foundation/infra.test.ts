import { ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { Redis } from "ioredis";
import { describe, expect, inject, it } from "vitest";
import { createTestDynamoClient } from "../support/dynamo.js";

describe("test infrastructure", () => {
  it("provides a Redis that answers", async () => {
    const redis = new Redis(inject("redisUrl"));
    try {
      expect(await redis.ping()).toBe("PONG");
    } finally {
      redis.disconnect();
    }
  });

  it("provides a DynamoDB endpoint that the AWS SDK v3 uses unchanged", async () => {
    const client = createTestDynamoClient(inject("dynamoEndpoint"));
    const out = await client.send(new ListTablesCommand({}));
    expect(Array.isArray(out.TableNames)).toBe(true);
    client.destroy();
  });
});
