/**
 * deploy/k8s/ cannot be applied here (no cluster), so it is read against the code, as the compose
 * test does: every variable the pods get is one src/config.ts knows, the environment they describe
 * passes production mode (and the example Secret's published values do not), the probes ask the
 * paths and ports the processes serve, shutdown fits in the grace period, and the pods run as a
 * non-root user with resources set.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { GATEWAY_VARIABLES, loadGatewayConfig } from "../../src/config.js";

const DIR = "deploy/k8s";

interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: { name: string; value?: string }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { allowPrivilegeEscalation?: boolean; runAsNonRoot?: boolean; readOnlyRootFilesystem?: boolean };
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } } };
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  spec?: {
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>;
    scaleTargetRef?: { kind: string; name: string };
    minReplicas?: number;
    maxReplicas?: number;
    ports?: { port: number; targetPort: string | number }[];
    template?: {
      metadata: { labels: Record<string, string> };
      spec: {
        terminationGracePeriodSeconds?: number;
        securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
        containers: Container[];
      };
    };
  };
}

function read(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(join(DIR, file), "utf8")).map((d) => {
    expect(d.errors, file).toEqual([]);
    return d.toJS() as Manifest;
  });
}

const kustomization = read("kustomization.yaml")[0] as unknown as { resources: string[] };
const manifests = kustomization.resources.flatMap(read);
const [exampleSecret] = read("secret.example.yaml");
const byKind = (kind: string) => manifests.filter((m) => m.kind === kind);
const deployment = (component: string) => {
  const found = byKind("Deployment").find(
    (d) => d.spec?.template?.metadata.labels["app.kubernetes.io/component"] === component,
  );
  if (!found) throw new Error(`no ${component} Deployment`);
  return found;
};
const containerOf = (d: Manifest) => d.spec!.template!.spec.containers[0]!;
const configMap = byKind("ConfigMap")[0]!;

/** A pod's environment: its ConfigMap and Secret (given), then its own `env` entries. */
function envOf(container: Container, secret: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) {
      expect(from.configMapRef.name).toBe(configMap.metadata.name);
      Object.assign(env, configMap.data);
    }
    if (from.secretRef) {
      expect(from.secretRef.name).toBe(exampleSecret?.metadata.name);
      Object.assign(env, secret);
    }
  }
  for (const e of container.env ?? []) env[e.name] = e.value ?? "";
  return env;
}

const ownSecret = {
  ADMIN_TOKEN: "adm_k8s_test_4f0a8c2e6b1d",
  GATEWAY_SECRET: "gws_k8s_test_7b3d9f1a5c0e2b8d4f6a1c3e5b7d9f0a",
};

/** The port number a probe asks, by name or number. */
function probePort(container: Container, probe: Probe | undefined): number | undefined {
  const port = probe?.httpGet?.port;
  if (typeof port === "number") return port;
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

describe("deploy/k8s", () => {
  it("lists manifests that exist: gateway and worker Deployments, a Service, an HPA, PodDisruptionBudgets", () => {
    for (const file of kustomization.resources) expect(existsSync(join(DIR, file)), file).toBe(true);
    expect(kustomization.resources).not.toContain("secret.example.yaml");
    expect(byKind("Deployment")).toHaveLength(2);
    expect(byKind("Service")).toHaveLength(1);
    expect(byKind("HorizontalPodAutoscaler")).toHaveLength(1);
    expect(byKind("PodDisruptionBudget")).toHaveLength(2);
  });

  it("gives the pods only variables src/config.ts knows, and an environment production mode accepts", () => {
    for (const [component, role] of [
      ["gateway", "gateway"],
      ["worker", "worker"],
    ] as const) {
      const container = containerOf(deployment(component));
      const env = envOf(container, ownSecret);
      for (const name of Object.keys(env)) expect(GATEWAY_VARIABLES, `${component}: ${name}`).toContain(name);
      expect(env.NODE_ENV).toBe("production");
      const config = loadGatewayConfig(env, ["node", ...(container.command ?? [])]);
      expect(config).toMatchObject({ production: true, role, demoEvent: false });
      expect(config.redisUrl ?? config.redisCluster).toBeTruthy();
      expect(config.dynamodb.embedded).toBe(false);
      // The compiled entry point, from a source file that exists.
      expect(container.command?.slice(0, 2)).toEqual(["node", "dist/main.js"]);
      expect(existsSync("src/main.ts")).toBe(true);
      // The example Secret's values are published: production refuses them.
      expect(() => loadGatewayConfig(envOf(container, exampleSecret?.stringData ?? {}), [])).toThrow(
        /ADMIN_TOKEN: a value published[\s\S]*GATEWAY_SECRET: a value published|GATEWAY_SECRET: a value published[\s\S]*ADMIN_TOKEN: a value published/,
      );
    }
  });

  it("probes what the processes serve: /livez for liveness, /readyz for readiness, on their ports", () => {
    const gateway = containerOf(deployment("gateway"));
    const gatewayPort = Number(envOf(gateway, ownSecret).PORT);
    for (const probe of [gateway.livenessProbe, gateway.startupProbe]) expect(probe?.httpGet?.path).toBe("/livez");
    expect(gateway.readinessProbe?.httpGet?.path).toBe("/readyz");
    for (const probe of [gateway.livenessProbe, gateway.readinessProbe, gateway.startupProbe]) {
      expect(probePort(gateway, probe)).toBe(gatewayPort);
    }
    const worker = containerOf(deployment("worker"));
    const healthPort = Number(envOf(worker, ownSecret).WORKER_HEALTH_PORT);
    expect(healthPort).toBeGreaterThan(0);
    expect(worker.livenessProbe?.httpGet?.path).toBe("/livez");
    expect(worker.readinessProbe?.httpGet?.path).toBe("/readyz");
    for (const probe of [worker.livenessProbe, worker.readinessProbe, worker.startupProbe]) {
      expect(probePort(worker, probe)).toBe(healthPort);
    }
  });

  it("drains the gateway: a preStop sleep, then SIGTERM's drain, all within the grace period", () => {
    const d = deployment("gateway");
    const container = containerOf(d);
    const command = container.lifecycle?.preStop?.exec?.command;
    expect(command?.[0]).toBe("sleep");
    const preStopSeconds = Number(command?.[1] ?? container.lifecycle?.preStop?.sleep?.seconds);
    const config = loadGatewayConfig(envOf(container, ownSecret), ["node", ...(container.command ?? [])]);
    expect(preStopSeconds).toBeGreaterThanOrEqual(5);
    expect(config.shutdownDrainMs).toBeGreaterThan(0);
    // main.ts exits by itself at the latest drain + 15 s after SIGTERM.
    const needed = preStopSeconds + config.shutdownDrainMs / 1000 + 15;
    expect(d.spec?.template?.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(needed);
    const worker = deployment("worker");
    const workerConfig = loadGatewayConfig(envOf(containerOf(worker), ownSecret), []);
    expect(worker.spec?.template?.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(
      workerConfig.shutdownDrainMs / 1000 + 15,
    );
  });

  it("runs every pod as a non-root user without privilege escalation, with requests and a memory limit", () => {
    for (const d of byKind("Deployment")) {
      const pod = d.spec!.template!.spec;
      expect(pod.securityContext?.runAsNonRoot, d.metadata.name).toBe(true);
      expect(pod.securityContext?.runAsUser).not.toBe(0);
      for (const c of pod.containers) {
        expect(c.securityContext?.allowPrivilegeEscalation, c.name).toBe(false);
        expect(c.resources?.requests?.cpu, c.name).toBeTruthy();
        expect(c.resources?.requests?.memory, c.name).toBeTruthy();
        expect(c.resources?.limits?.memory, c.name).toBeTruthy();
      }
    }
  });

  it("wires the Service, the HPA and the PodDisruptionBudgets to the Deployments' pods", () => {
    const gateway = deployment("gateway");
    const labels = gateway.spec!.template!.metadata.labels;
    const service = byKind("Service")[0]!;
    for (const [k, v] of Object.entries(service.spec?.selector ?? {})) expect(labels[k]).toBe(v);
    const target = service.spec?.ports?.[0]?.targetPort;
    expect(containerOf(gateway).ports?.some((p) => p.name === target || p.containerPort === target)).toBe(true);
    const hpa = byKind("HorizontalPodAutoscaler")[0]!;
    expect(hpa.spec?.scaleTargetRef).toMatchObject({ kind: "Deployment", name: gateway.metadata.name });
    expect(hpa.spec?.minReplicas).toBeGreaterThanOrEqual(2);
    const pdbs = byKind("PodDisruptionBudget");
    for (const d of byKind("Deployment")) {
      const podLabels = d.spec!.template!.metadata.labels;
      const covering = pdbs.filter((p) =>
        Object.entries(p.spec?.selector?.matchLabels ?? {}).every(([k, v]) => podLabels[k] === v),
      );
      expect(covering, d.metadata.name).toHaveLength(1);
      for (const [k, v] of Object.entries(d.spec?.selector?.matchLabels ?? {})) expect(podLabels[k]).toBe(v);
    }
  });
});
