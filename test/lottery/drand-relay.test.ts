/**
 * A gateway with drand relays (DRAND_RELAYS) takes the draw's round by itself once it is published:
 * nobody has to record it, so the operator cannot withhold it. A relay is only a source of
 * candidates: one that answers another key's signature is not taken (the draw keeps waiting), and
 * the next relay's verified round is. The relays are HTTP servers started here, serving a test
 * chain's rounds as api.drand.sh does (nothing is fetched from the internet). Real Redis, the test
 * DynamoDB.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDocumentClient, createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { randomnessOf } from "../../src/lottery/drand.js";
import { drandRelays } from "../../src/lottery/drand-relay.js";
import { createLotteryStore, type LotteryStore } from "../../src/lottery/store.js";
import { createWaitingRoom } from "../../src/waiting-room/index.js";
import { type TestChain, testChain } from "../support/drand-chain.js";
import { eventId as freshEventId, ok, SECRET, until } from "../waiting-room/helpers.js";

let dynamo: ReturnType<typeof createDynamoClient>;
let store: LotteryStore;
let redis: Redis;
const servers: Server[] = [];

beforeAll(async () => {
  dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  const tableName = `relay_${freshEventId("t")}`;
  await ensureTable(dynamo, tableName);
  store = createLotteryStore({ doc: createDocumentClient(dynamo), tableName });
  redis = new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  redis.disconnect();
  dynamo.destroy();
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A relay serving `chain`'s rounds (`GET /<chainHash>/public/<round>`); every request is counted. */
async function relay(chainHash: string, signer: TestChain): Promise<{ url: string; asked: string[] }> {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(req.url ?? "");
    const m = /^\/([0-9a-f]{64})\/public\/(\d+)$/.exec(req.url ?? "");
    if (!m || m[1] !== chainHash) {
      res.writeHead(404).end();
      return;
    }
    const b = signer.sign(Number(m[2]));
    res.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        round: b.round,
        randomness: randomnessOf(b.signature),
        signature: b.signature,
        ...(b.previousSignature ? { previous_signature: b.previousSignature } : {}),
      }),
    );
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked };
}

describe("drand relays", () => {
  it("the draw fetches its round once published and takes it only when it verifies", async () => {
    const t = testChain();
    const liar = await relay(t.chain.chainHash, testChain());
    const honest = await relay(t.chain.chainHash, t);
    const room = createWaitingRoom({
      redis,
      secret: SECRET,
      lottery: store,
      drandRounds: drandRelays([liar.url, `${honest.url}/`]),
    });
    try {
      const evt = freshEventId("relay");
      ok(
        await room.configure(evt, {
          onSaleAt: Date.now() + 3_600_000,
          admitPerSecond: 0,
          maxActive: 10,
          sessionSeconds: 60,
          drand: t.chain,
        }),
      );
      for (let i = 0; i < 20; i++) ok(await room.join(evt, `fan-${evt}-${i}`));
      ok(await room.openNow(evt));
      const round = ok(await room.info(evt)).info.lottery.drand!.round;
      // Nobody records the round: the draw job's calls fetch it.
      const lottery = await until(async () => {
        await room.drawDue(evt);
        const l = ok(await room.info(evt)).info.lottery;
        return l.seed === undefined ? undefined : l;
      }, 20_000);
      expect(lottery.beaconRound).toEqual(t.sign(round));
      expect(lottery.beacon).toBe(randomnessOf(t.sign(round).signature));
      expect((await store.read(evt))!.draw).toMatchObject({ round, beacon: lottery.beacon });
      // The lying relay was asked first and its round refused; the honest one's was taken.
      expect(liar.asked).toContain(`/${t.chain.chainHash}/public/${round}`);
      expect(honest.asked).toContain(`/${t.chain.chainHash}/public/${round}`);
    } finally {
      await room.close();
    }
  }, 30_000);

  it("a lying relay alone gets nothing taken: the draw waits", async () => {
    const t = testChain();
    const liar = await relay(t.chain.chainHash, testChain());
    const room = createWaitingRoom({ redis, secret: SECRET, lottery: store, drandRounds: drandRelays([liar.url]) });
    try {
      const evt = freshEventId("liar");
      ok(
        await room.configure(evt, {
          onSaleAt: Date.now() + 3_600_000,
          admitPerSecond: 0,
          maxActive: 10,
          sessionSeconds: 60,
          drand: t.chain,
        }),
      );
      ok(await room.join(evt, `fan-${evt}`));
      ok(await room.openNow(evt));
      await until(async () => {
        await room.drawDue(evt);
        return liar.asked.length > 0 ? true : undefined;
      }, 10_000);
      expect(await room.drawDue(evt)).toMatchObject({ ok: false, reason: "awaiting_beacon" });
      expect(ok(await room.info(evt)).info.lottery).toMatchObject({ awaitingBeacon: true });
      expect((await store.read(evt))!.beacon).toBeUndefined();
    } finally {
      await room.close();
    }
  }, 30_000);

  it("asks for no round before its time", async () => {
    const t = testChain({ genesisTime: Math.floor(Date.now() / 1_000) });
    const asked: string[] = [];
    const rounds = drandRelays(["http://127.0.0.1:9"], {
      fetch: (async (url: string) => {
        asked.push(url);
        return new Response("{}", { status: 404 });
      }) as typeof fetch,
    });
    expect(await rounds(t.chain, 1_000_000)).toBeNull();
    expect(asked).toEqual([]);
  });
});
