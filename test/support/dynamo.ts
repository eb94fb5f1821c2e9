import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createDynamoClient } from "../../src/dynamodb/client.js";

/** A client for the endpoint the global setup provides (local DynamoDB unless DYNAMODB_ENDPOINT is set). */
export function createTestDynamoClient(endpoint: string): DynamoDBClient {
  return createDynamoClient({ endpoint, region: "us-east-1", maxSockets: 512, maxAttempts: 1 });
}
