// Dated API versions: each account is pinned at sign-up to the current version, a request may
// name another in Tender-Version, answers say which version they are in, and an older version's
// shape survives a change (src/domain/api-versions.ts).
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { API_VERSIONS, CURRENT_API_VERSION, answerForVersion } from "../../src/domain/api-versions";
import { call, expectError, signup } from "../support/http";
import { createUser } from "../support/fixtures";

const FIRST = "2026-11-01";

async function pinnedTo(version: string) {
  const acct = await signup();
  // Before the key's first authenticated call, so no isolate has its credential cached yet.
  await env.DB.prepare("UPDATE accounts SET api_version = ? WHERE id = ?").bind(version, acct.id).run();
  return acct;
}

describe("API versions", () => {
  it("the current version is today's, and a new account is pinned to it", async () => {
    expect(CURRENT_API_VERSION).toBe("2026-11-27");
    const acct = await signup("Acme", { apiVersion: CURRENT_API_VERSION });
    const row = await env.DB.prepare("SELECT api_version FROM accounts WHERE id = ?").bind(acct.id).first<{ api_version: string }>();
    expect(row?.api_version).toBe(CURRENT_API_VERSION);
    const res = await call("/api/users", { key: acct.key });
    expect(res.headers.get("tender-version")).toBe(CURRENT_API_VERSION);
  });

  it("an account pinned to 2026-11-01 sees events without object_id and sequence; the header asks for the new shape", async () => {
    const acct = await pinnedTo(FIRST);
    const user = await createUser(acct);
    const old = await call("/api/events", { key: acct.key });
    expect(old.status).toBe(200);
    expect(old.headers.get("tender-version")).toBe(FIRST);
    const [event] = old.body.data;
    expect(event).toMatchObject({ object: "event", type: "customer.created" });
    expect(event).not.toHaveProperty("object_id");
    expect(event).not.toHaveProperty("sequence");
    const single = await call(`/api/events/${event.id}`, { key: acct.key });
    expect(single.body).not.toHaveProperty("sequence");

    const current = await call("/api/events", { key: acct.key, headers: { "tender-version": CURRENT_API_VERSION } });
    expect(current.headers.get("tender-version")).toBe(CURRENT_API_VERSION);
    expect(current.body.data[0]).toMatchObject({ id: event.id, object_id: user.id, sequence: 1 });
  });

  it("a current account can ask for the older shape", async () => {
    const acct = await signup();
    await createUser(acct);
    const res = await call("/api/events", { key: acct.key, headers: { "tender-version": FIRST } });
    expect(res.headers.get("tender-version")).toBe(FIRST);
    expect(res.body.data[0]).not.toHaveProperty("object_id");
    // Objects other than events are unchanged between the two versions.
    const users = await call("/api/users", { key: acct.key, headers: { "tender-version": FIRST } });
    expect(users.body.data[0]).toMatchObject({ name: "Ada Lovelace" });
  });

  it("an unknown or malformed version answers 400 api_version_invalid, naming the known ones, and changes nothing", async () => {
    const acct = await signup();
    for (const version of ["2020-01-01", "latest", "2026-11-22x", ""]) {
      const res = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" }, headers: { "tender-version": version } });
      expectError(res, 400, "invalid_request_error", "api_version_invalid");
      expect(res.body.error.param).toBe("Tender-Version");
      expect(res.body.error.message).toContain(CURRENT_API_VERSION);
    }
    expect((await call("/api/users", { key: acct.key })).body.data).toEqual([]);
    // Authentication comes first: no credential is a 401 whatever the version.
    expectError(await call("/api/users", { headers: { "tender-version": "nope" } }), 401, "authentication_error");
  });

  it("a stored idempotent answer replays in the version of the request that replays it", async () => {
    const acct = await signup();
    await createUser(acct);
    const [event] = (await call("/api/events", { key: acct.key })).body.data;
    const first = await call(`/api/events/${event.id}/redeliver`, { key: acct.key, body: {}, idempotencyKey: "v-replay" });
    expect(first.status, first.text).toBeLessThan(300);
    const replay = await call(`/api/events/${event.id}/redeliver`, { key: acct.key, body: {}, idempotencyKey: "v-replay", headers: { "tender-version": FIRST } });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.headers.get("tender-version")).toBe(FIRST);
    expect(replay.status).toBe(first.status);
  });

  it("downgrades nested objects one version at a time, and leaves the current shape alone", () => {
    const page = { object: "list", data: [{ object: "event", id: "evt_1", object_id: "usr_1", sequence: 3, data: { object: "user" } }] };
    expect(answerForVersion(page, CURRENT_API_VERSION)).toEqual(page);
    expect(answerForVersion(page, FIRST)).toEqual({ object: "list", data: [{ object: "event", id: "evt_1", data: { object: "user" } }] });
    // Every version is dated, in order, and every one after the first says how to go back.
    const dates = API_VERSIONS.map((v) => v.version);
    expect([...dates].sort()).toEqual(dates);
    for (const v of API_VERSIONS.slice(1)) expect(typeof v.downgrade).toBe("function");
  });

  it("the OpenAPI document names the Tender-Version header", async () => {
    const doc = (await call("/openapi.json")).body;
    const params = doc.paths["/api/users"].get.parameters.map((p: { name: string }) => p.name);
    expect(params).toContain("tender-version");
  });
});
