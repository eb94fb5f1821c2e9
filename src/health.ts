/**
 * Readiness, shared by the gateway's /readyz (src/http/routes/health.ts) and the workers' health
 * server (src/workers/health-server.ts): the probes of Redis and DynamoDB, each bounded in time.
 */

export interface HealthProbe {
  /** Resolves when the dependency answers; rejects (or times out) when it does not. */
  check(): Promise<void>;
}

/**
 * What readiness reads. `draining` is set by src/main.ts on SIGTERM: from then on readiness
 * answers 503, so a load balancer stops sending new fans before the server closes.
 */
export interface HealthDeps {
  redis: HealthProbe;
  dynamodb: HealthProbe;
  lifecycle: { draining: boolean };
}

const CHECK_TIMEOUT_MS = 2_000;

/** null when the dependency answered within CHECK_TIMEOUT_MS, else `name: why`. */
export async function probe(name: string, check: HealthProbe["check"]): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("timed out")), CHECK_TIMEOUT_MS);
      }),
    ]);
    return null;
  } catch (err) {
    return `${name}: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    clearTimeout(timer);
  }
}

export type CheckState = "ok" | "down";

export interface ReadyBody {
  status: "ready" | "degraded";
  checks: { redis: CheckState; dynamodb: "ok" };
  /** What failed, when degraded. */
  failures?: string[];
}

export type Readiness =
  | { ready: true; body: ReadyBody }
  | { ready: false; message: string; details: Record<string, unknown> };

/**
 * The gateway can sell while DynamoDB answers: it decides who owns a seat. Without Redis held fans
 * still buy (holds and purchases go to DynamoDB, joins answer 503), so Redis down is `degraded`,
 * not unready: a readiness probe failing with Redis would drain every pod at the worst moment.
 */
export async function gatewayReadiness(health: HealthDeps): Promise<Readiness> {
  if (health.lifecycle.draining) {
    return { ready: false, message: "draining: this process is shutting down", details: { draining: true } };
  }
  const [redis, dynamodb] = await Promise.all([
    probe("redis", () => health.redis.check()),
    probe("dynamodb", () => health.dynamodb.check()),
  ]);
  const failures = [redis, dynamodb].filter((f): f is string => f !== null);
  const redisState: CheckState = redis ? "down" : "ok";
  if (dynamodb) {
    return {
      ready: false,
      message: "not ready: DynamoDB does not answer",
      details: { failures, checks: { redis: redisState, dynamodb: "down" } },
    };
  }
  return {
    ready: true,
    body: {
      status: redis ? "degraded" : "ready",
      checks: { redis: redisState, dynamodb: "ok" },
      ...(failures.length > 0 ? { failures } : {}),
    },
  };
}
