// Accounts on both shards: sign-up places them, each credential names its shard and answers say it
// (Tender-Shard, in development), and an id from another shard answers exactly as another account's
// id on the same shard does: 404, on every operation that takes an id, writing nothing anywhere.
import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { OTHER_SHARD, TEST_SHARD, envOf } from "../support/env";
import { type Account, BASE, SUITE_API_VERSION, call, expectError, expectErrorShape, signup } from "../support/http";
import { type Operation, credentialFor, fixtureId, label, operations, pathWith, validBody } from "../support/operations";
import { type Fixtures, seed } from "../support/fixtures";
import { installFakeStripe } from "../support/live";
import { installReceiver } from "../support/receiver";

async function signupOn(shard: number, name: string): Promise<Account & { liveKey: string }> {
  const res = await call("/api/accounts", { body: { name, email: `${name.toLowerCase().replaceAll(" ", "")}@shards.test` }, headers: { "tender-shard": String(shard) } });
  expect(res.status, res.text).toBe(201);
  // Pinned as signup() pins the suite's accounts (the fixtures' payouts name no recipient).
  await envOf(shard).DB.prepare("UPDATE accounts SET api_version = ? WHERE id = ?").bind(SUITE_API_VERSION, res.body.id).run();
  return { id: res.body.id, key: res.body.api_key, liveKey: res.body.live_api_key };
}

/** Every table's row count on a shard: what "writes nothing" is checked against. */
async function countsOn(shard: number) {
  const db = envOf(shard).DB;
  const { results } = await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'd1_migrations'").all<{ name: string }>();
  const counts: Record<string, number> = {};
  for (const { name } of results) counts[name] = Number((await db.prepare(`SELECT count(*) AS n FROM "${name}"`).first<{ n: number }>())!.n);
  return counts;
}

describe("sign-up places accounts on the shards", () => {
  it("at random without the development header: both shards get accounts; each key names its shard and each answer says it", async () => {
    const seen = new Set<number>();
    for (let i = 0; i < 24; i++) {
      const response = await exports.default.fetch(`${BASE}/api/accounts`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name: `Random ${i}`, email: `random${i}@shards.test` }),
      });
      expect(response.status).toBe(201);
      const body = (await response.json()) as { id: string; api_key: string; live_api_key: string };
      const shard = Number(response.headers.get("tender-shard"));
      expect([0, 1]).toContain(shard);
      // The key's first character after its mode is its shard's number; the account is there alone.
      expect(body.api_key.charAt(8)).toBe(String(shard));
      expect(body.live_api_key.charAt(8)).toBe(String(shard));
      expect(await envOf(shard).DB.prepare("SELECT count(*) AS n FROM accounts WHERE id = ?").bind(body.id).first("n")).toBe(1);
      expect(await envOf(1 - shard).DB.prepare("SELECT count(*) AS n FROM accounts WHERE id = ?").bind(body.id).first("n")).toBe(0);
      const me = await call("/api/users", { key: body.api_key });
      expect(me.headers.get("tender-shard")).toBe(String(shard));
      seen.add(shard);
    }
    // 24 fair draws all on one shard: a chance of 1 in 8 million.
    expect([...seen].sort()).toEqual([0, 1]);
  });

  it("the development header chooses the shard; one that is not bound is refused", async () => {
    const there = await signupOn(OTHER_SHARD, "Chosen");
    expect(there.key.charAt(8)).toBe(String(OTHER_SHARD));
    const token = (await call("/oauth/token", { body: { grant_type: "client_credentials", client_secret: there.key } })).body.access_token as string;
    expect(token.charAt(8)).toBe(String(OTHER_SHARD));
    const read = await call("/api/users", { key: token });
    expect(read.status).toBe(200);
    expect(read.headers.get("tender-shard")).toBe(String(OTHER_SHARD));
    for (const bad of ["2", "-1", "one", "61"]) {
      expectError(await call("/api/accounts", { body: { name: "Nowhere", email: "nowhere@shards.test" }, headers: { "tender-shard": bad } }), 400, "invalid_request_error", "shard_invalid");
    }
  });
});

describe("an id from another shard answers 404 like any other account's", () => {
  const receiver = installReceiver();
  const stripe = installFakeStripe();
  let owner: Account & { liveKey: string };
  let fx: Fixtures;
  let neighbour: Account & { liveKey: string };
  let stranger: Account & { liveKey: string };

  beforeAll(async () => {
    owner = await signupOn(TEST_SHARD, "Owner");
    fx = await seed(owner);
    neighbour = await signupOn(TEST_SHARD, "Neighbour");
    stranger = await signupOn(OTHER_SHARD, "Stranger");
    return () => {
      stripe.restore();
      receiver.restore();
    };
  }, 60_000);

  const send = async (op: Operation, who: Account & { liveKey: string }) => {
    const path = pathWith(op, fixtureId(op, fx));
    return call(path, { method: op.method.toUpperCase(), key: await credentialFor(op, who), body: op.method === "get" ? undefined : validBody(op, fx) });
  };

  it("on every operation that takes an id, with the same answer a neighbour on the owner's shard gets, and nothing written on either shard", async () => {
    const withId = (await operations()).filter((op) => !op.isPublic && op.hasId);
    expect(withId.length).toBeGreaterThan(20);
    const before = [await countsOn(TEST_SHARD), await countsOn(OTHER_SHARD)];
    let notFound = 0;
    for (const op of withId) {
      const context = label(op);
      const near = await send(op, neighbour);
      const far = await send(op, stranger);
      expectErrorShape(far, `${context} from the other shard`);
      expect(far.status, `${context}: ${far.text.slice(0, 200)}`).toBe(near.status);
      expect(far.body.error.code, context).toBe(near.body.error.code);
      if (near.status === 404) {
        expect(far.body.error.type, context).toBe("not_found_error");
        notFound++;
      }
      expect(far.text, context).not.toContain("Proof User");
    }
    // All but the live-only processor routes (403 for a test key, from either shard) are 404s.
    expect(notFound).toBeGreaterThanOrEqual(withId.length - 3);
    expect([await countsOn(TEST_SHARD), await countsOn(OTHER_SHARD)]).toEqual(before);
    // And the owner still reads its own, so the ids were real.
    expect((await call(`/api/users/${fx.user}`, { key: owner.key })).status).toBe(200);
  }, 120_000);
});
