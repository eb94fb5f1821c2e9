/** What every request handler can reach through `c.var`, and the app's type. */
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Logger } from "../logger.js";

export interface HealthProbe {
  /** Resolves when the dependency answers; rejects (or times out) when it does not. */
  check(): Promise<void>;
}

export interface AppDeps {
  logger: Logger;
  health: { redis: HealthProbe; dynamodb: HealthProbe };
}

export type AppEnv = {
  Variables: {
    requestId: string;
    log: Logger;
    deps: AppDeps;
  };
};

export type App = OpenAPIHono<AppEnv>;
