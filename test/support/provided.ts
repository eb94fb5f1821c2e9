/** What test/global-setup.ts provides to every test file, read with `inject(...)`. */
import type {} from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
    dynamoEndpoint: string;
    /** JSON-lines file the chaos scenarios add their report rows to (test/chaos/support/report.ts). */
    chaosReportFile: string;
  }
}
