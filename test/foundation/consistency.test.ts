// D1 read replication through the Sessions API: every answer carries the session's bookmark in
// Tender-Consistency, and a request that sends it back reads at least that fresh.
import { describe, expect, it } from "vitest";
import { call, expectError, signup } from "../support/http";

describe("Tender-Consistency", () => {
  it("every answer carries a bookmark; a read that sends it back sees the write it came from", async () => {
    const acct = await signup();
    const created = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" } });
    expect(created.status).toBe(201);
    const bookmark = created.headers.get("tender-consistency");
    // D1's bookmark form: three 8-digit and one 32-digit hex groups.
    expect(bookmark).toMatch(/^[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32}$/);
    const read = await call(`/api/users/${created.body.id}`, { key: acct.key, headers: { "tender-consistency": bookmark! } });
    expect(read.status).toBe(200);
    expect(read.body.id).toBe(created.body.id);
    // The read's own bookmark is at least as new as the one it was sent.
    expect(read.headers.get("tender-consistency")! >= bookmark!).toBe(true);
    const list = await call("/api/users", { key: acct.key, headers: { "tender-consistency": bookmark! } });
    expect(list.body.data.map((u: { id: string }) => u.id)).toContain(created.body.id);
  });

  it("a malformed bookmark answers 400 consistency_invalid", async () => {
    const acct = await signup();
    for (const bad of ["two words", "x".repeat(300), "not-a-real-bookmark", "00000000-00000008-00000000"]) {
      const error = expectError(await call("/api/users", { key: acct.key, headers: { "tender-consistency": bad } }), 400, "invalid_request_error", "consistency_invalid");
      expect(error.message).toContain("Tender-Consistency");
    }
  });
});
