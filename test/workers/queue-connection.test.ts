/**
 * BullMQ's producers have a Redis connection of their own (src/services.ts). BullMQ defines its Lua
 * scripts on the client it is given, and ioredis copies every script defined on a client onto each
 * pipeline it builds, one per auto-pipelined turn: on the gateway's commands connection (the line,
 * the holds, the seat map) BullMQ's 64 scripts made each such turn cost about twice the CPU (`npm
 * run bench:pipeline`). This checks the wiring against a real Redis: the commands client carries
 * no script definition (BullMQ's are on the queues' connection, the gateway defines none), the
 * queues' scripts still answer, and closing the services closes the queues' connection too.
 */
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type Services, buildServices } from "../../src/services.js";
import { testServicesConfig, uniqueId } from "../gateway/harness.js";

/** The scripts defined on an ioredis client (defineCommand), by command name. */
const definedScripts = (client: unknown) => Object.keys((client as { scriptsSet: Record<string, unknown> }).scriptsSet);

describe("BullMQ's producers on their own connection", () => {
  let services: Services;

  beforeAll(async () => {
    services = buildServices({
      ...testServicesConfig({ tableName: uniqueId("qconn"), redisUrl: inject("redisUrl") }),
      queues: true,
    });
    // BullMQ defines its scripts once its connection is ready.
    await services.queues!.sweep.waitUntilReady();
  });

  afterAll(async () => {
    await services?.close();
  });

  it("keeps BullMQ's scripts off the commands connection", async () => {
    const queues = services.queues!;
    expect(queues.connection).not.toBe(services.clients.redis);
    const bullmq = definedScripts(queues.connection);
    // BullMQ's own (addStandardJob, moveToActive...): dozens, every one absent from the gateway's client.
    expect(bullmq.length).toBeGreaterThan(30);
    // (named with BullMQ's version: `addStandardJob:<version>`)
    expect(bullmq.some((name) => name.startsWith("addStandardJob"))).toBe(true);
    // The gateway's own scripts are plain EVALSHA/FCALL calls (src/redis/scripts.ts): none at all.
    expect(definedScripts(services.clients.redis)).toEqual([]);
  });

  it("runs BullMQ's scripts on the queues' connection", async () => {
    // getJobCounts is one of BullMQ's scripts (getCounts): it answers through the queues' client.
    const counts = await services.queues!.outbox.getJobCounts("waiting", "delayed");
    expect(counts).toEqual({ waiting: expect.any(Number), delayed: expect.any(Number) });
  });

  it("closes the queues' connection with the services", async () => {
    const connection = services.queues!.connection as Redis;
    await services.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(connection.status).toBe("end");
    services = undefined as unknown as Services;
  });
});
