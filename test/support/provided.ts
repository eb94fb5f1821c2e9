/** What test/global-setup.ts provides to every test file, read with `inject(...)`. */
import type {} from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
    dynamoEndpoint: string;
  }
}
