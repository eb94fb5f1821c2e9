/**
 * docker-compose.yml and the Dockerfile cannot run here (no Docker engine), so they are read
 * against the code: every variable compose sets is one the config knows, every command starts a
 * file the build makes, every service has a healthcheck and starts after what it needs is healthy,
 * the environment it describes passes production mode (the image sets NODE_ENV=production), and
 * the image is built in stages and runs the compiled build as a non-root user.
 */
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { GATEWAY_VARIABLES, loadGatewayConfig, loadLocalDynamoConfig } from "../../src/config.js";

interface Service {
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition?: string }>;
  healthcheck?: { test?: string[] };
}

const compose = parse(readFileSync("docker-compose.yml", "utf8")) as { services: Record<string, Service> };
// Variables the AWS SDK (not our config) reads.
const sdkVariables = new Set(["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]);
/** What the operator exports before `docker compose up` (compose refuses to start without them). */
const operatorSecrets: Record<string, string> = {
  ADMIN_TOKEN: "adm_compose_test_5d1e9b2c7a",
  GATEWAY_SECRET: "gws_compose_test_0a7c3e9b1d5f2a8c4e6b0d3f9a1c5e7b",
};
const expand = (v: string) =>
  v
    .replace(/\$\{([A-Z_]+):-([^}]*)\}/g, (_, name: string, fallback: string) => operatorSecrets[name] ?? fallback)
    .replace(/\$\{([A-Z_]+):\?[^}]*\}/g, (_, name: string) => {
      const value = operatorSecrets[name];
      if (!value) throw new Error(`compose requires ${name}, which this test does not supply`);
      return value;
    });

/** The source file a compiled entry point comes from: `dist/local/x.js` -> `src/local/x.ts`. */
function sourceOf(entry: string): string {
  return entry.replace(/^dist\//, "src/").replace(/\.js$/, ".ts");
}

interface Stage {
  from: string;
  name: string | undefined;
  lines: string[];
}

/** The Dockerfile as stages of instructions (continuation lines joined). */
function dockerfileStages(): Stage[] {
  const text = readFileSync("Dockerfile", "utf8").replace(/\\\n\s*/g, " ");
  const stages: Stage[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) stages.push({ from: from[1]!, name: from[2], lines: [] });
    else stages.at(-1)?.lines.push(line);
  }
  return stages;
}

describe("docker-compose.yml", () => {
  it("has Redis, a DynamoDB endpoint, a gateway and a worker", () => {
    expect(Object.keys(compose.services)).toEqual(expect.arrayContaining(["redis", "dynamodb", "gateway", "worker"]));
    expect(compose.services.gateway?.command).toContain("--role=gateway");
    expect(compose.services.worker?.command).toContain("--role=worker");
  });

  it("gives every service a healthcheck, and starts each after what it depends on is healthy", () => {
    for (const [name, service] of Object.entries(compose.services)) {
      expect(service.healthcheck?.test?.length, `${name} healthcheck`).toBeGreaterThan(0);
      for (const [dep, how] of Object.entries(service.depends_on ?? {})) {
        expect(compose.services[dep], `${name} -> ${dep}`).toBeDefined();
        expect(how.condition, `${name} -> ${dep}`).toBe("service_healthy");
      }
    }
    expect(Object.keys(compose.services.gateway?.depends_on ?? {}).sort()).toEqual(["dynamodb", "redis"]);
    expect(Object.keys(compose.services.worker?.depends_on ?? {}).sort()).toEqual(["dynamodb", "redis"]);
    // The worker's healthcheck asks its health server, on the port compose gives it.
    const port = compose.services.worker?.environment?.WORKER_HEALTH_PORT;
    expect(compose.services.worker?.healthcheck?.test?.join(" ")).toContain(`127.0.0.1:${port}/readyz`);
  });

  it("runs compiled files the build makes, with environments production mode accepts", () => {
    for (const [name, service] of Object.entries(compose.services)) {
      const entry = service.command?.find((part) => part.startsWith("dist/"));
      if (entry) expect(existsSync(sourceOf(entry)), `${name}: ${entry}`).toBe(true);
      expect(
        service.command?.some((part) => part.endsWith(".ts")),
        `${name} runs TypeScript`,
      ).toBe(false);
    }
    const imageEnv = dockerfileStages()
      .at(-1)
      ?.lines.find((l) => l.startsWith("ENV "));
    expect(imageEnv).toBe("ENV NODE_ENV=production");
    for (const name of ["gateway", "worker"]) {
      const env = Object.fromEntries(
        Object.entries(compose.services[name]?.environment ?? {}).map(([k, v]) => [k, expand(String(v))]),
      );
      for (const variable of Object.keys(env)) {
        if (!sdkVariables.has(variable)) expect(GATEWAY_VARIABLES, `${name}: ${variable}`).toContain(variable);
      }
      const config = loadGatewayConfig(
        { NODE_ENV: "production", ...Object.fromEntries(Object.entries(env).filter(([k]) => !sdkVariables.has(k))) },
        ["node", "main.js", ...(compose.services[name]?.command ?? [])],
      );
      expect(config.production).toBe(true);
      expect(config.role).toBe(name);
      expect(config.redisUrl).toBe("redis://redis:6379");
      expect(config.dynamodb.endpoint).toBe("http://dynamodb:8000");
      expect(config.adminToken).toBe(operatorSecrets.ADMIN_TOKEN);
      expect(config.gatewaySecret).toBe(operatorSecrets.GATEWAY_SECRET);
    }
    // The same secrets with no Redis or DynamoDB named: refused (what compose's endpoints are for).
    expect(() => loadGatewayConfig({ NODE_ENV: "production", ...operatorSecrets }, [])).toThrow(/REDIS_URL/);
    const dynamo = loadLocalDynamoConfig([], compose.services.dynamodb?.environment ?? {});
    expect(dynamo).toMatchObject({ port: 8000, host: "0.0.0.0" });
  });

  it("publishes no default secret: without them exported, compose refuses to start", () => {
    for (const name of ["gateway", "worker"]) {
      const env = compose.services[name]?.environment ?? {};
      expect(env.ADMIN_TOKEN).toMatch(/^\$\{ADMIN_TOKEN:\?/);
      expect(env.GATEWAY_SECRET).toMatch(/^\$\{GATEWAY_SECRET:\?/);
    }
  });
});

describe("Dockerfile", () => {
  const stages = dockerfileStages();
  const runtime = stages.at(-1)!;
  const build = stages.find((s) => s.name === "build");

  it("builds in one stage and runs from another on the current LTS Node, slim", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(build).toBeDefined();
    expect(build?.lines).toEqual(expect.arrayContaining(["RUN npm ci --no-audit --no-fund", "RUN npm run build"]));
    for (const stage of stages) expect(stage.from).toBe("node:24-bookworm-slim");
  });

  it("takes only production dependencies and the built output into the runtime stage", () => {
    expect(runtime.lines.some((l) => /^RUN npm ci --omit=dev\b/.test(l))).toBe(true);
    const copied = runtime.lines.filter((l) => l.startsWith("COPY --from=build ")).map((l) => l.split(/\s+/)[2]);
    expect(copied.sort()).toEqual(["/app/dist", "/app/lua", "/app/waiting-room/dist"]);
    expect(runtime.lines.some((l) => /^COPY \. /.test(l))).toBe(false);
    // What the build stage makes is what `npm run build` makes (and lua/ is in the tree).
    const scripts = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.build).toContain("tsconfig.build.json");
    expect(scripts["build:pages"]).toBe("node waiting-room/build.mjs");
    expect(existsSync("lua")).toBe(true);
  });

  it("runs as a non-root user, checks its health with node, and runs the compiled entry as PID 1", () => {
    const user = runtime.lines.filter((l) => l.startsWith("USER ")).at(-1);
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^USER (root|0)\b/);
    const health = runtime.lines.find((l) => l.startsWith("HEALTHCHECK "));
    expect(health).toContain('"node"');
    expect(health).toContain("/livez");
    expect(health).not.toContain("curl");
    const cmd = runtime.lines.filter((l) => l.startsWith("CMD ")).at(-1);
    expect(JSON.parse(cmd!.slice(4))).toEqual(["node", "dist/main.js"]);
    expect(existsSync(sourceOf("dist/main.js"))).toBe(true);
  });

  it("keeps node_modules, dist and local data out of the build context", () => {
    const ignored = readFileSync(".dockerignore", "utf8").split("\n");
    expect(ignored).toEqual(expect.arrayContaining(["node_modules", "dist", ".data", ".git", ".env"]));
  });
});
