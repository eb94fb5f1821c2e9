/** The OpenAPI document the gateway serves must agree with the contract (docs/API.md). */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTable, type Gateway, startGateway } from "./harness.js";

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
});
afterAll(async () => {
  await gw.close();
});

/** `METHOD /path` of every endpoint the contract names, with {params} as OpenAPI writes them. */
function contractEndpoints(): string[] {
  const text = readFileSync("docs/API.md", "utf8");
  const found = new Set<string>();
  for (const m of text.matchAll(/`(GET|POST|PUT|PATCH|DELETE) (\/[^`\s]+)`/g)) found.add(`${m[1]} ${m[2]}`);
  return [...found];
}

describe("/openapi.json", () => {
  it("documents every endpoint of the contract, and /docs serves the interactive page", async () => {
    const res = await gw.request("/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    expect(doc.openapi).toBe("3.1.0");
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)),
    );
    const endpoints = contractEndpoints();
    expect(endpoints.length).toBeGreaterThanOrEqual(15);
    expect(endpoints.filter((e) => !documented.has(e))).toEqual([]);

    // What every route of a kind answers is in each one's responses (an outside pass found 429s
    // on operator routes and 400s for a bad event id that the document did not list).
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops) as [string, { responses: Record<string, unknown> }][]) {
        const codes = Object.keys(op.responses);
        if (path.startsWith("/v1/admin/"))
          expect(codes, `${method} ${path}`).toEqual(expect.arrayContaining(["401", "429"]));
        if (path.includes("{eventId}"))
          expect(codes, `${method} ${path}`).toEqual(expect.arrayContaining(["400", "404"]));
      }
    }
    const error = (doc as { components?: { schemas?: Record<string, unknown> } }).components?.schemas?.Error;
    expect(error).toBeDefined();

    const docs = await gw.request("/docs");
    expect(docs.status).toBe(200);
    expect(await docs.text()).toContain("swagger-ui-bundle.js");
    expect(await (await gw.request("/docs/assets/init.js")).text()).toContain("/openapi.json");
    const bundle = await gw.request("/docs/assets/swagger-ui-bundle.js");
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get("content-type")).toContain("javascript");
  });
});
