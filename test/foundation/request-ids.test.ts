import { describe, expect, it } from "vitest";
import { call, expectError, ISO_MS, signup, UUID_V7 } from "../support/http";
import { createKey } from "../support/fixtures";

describe("POST /api/request-id", () => {
  it("generates a UUIDv7 for the purpose, stamped with the time it carries, and stores the metadata", async () => {
    const acct = await signup();
    const before = Date.now();
    const res = await call("/api/request-id", { key: acct.key, body: { purpose: "checkout", metadata: { order: "A-1001", attempt: 2, test: true, note: null } } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(UUID_V7),
      object: "request_id",
      livemode: false,
      purpose: "checkout",
      metadata: { order: "A-1001", attempt: 2, test: true, note: null },
      timestamp: expect.stringMatching(ISO_MS),
      status: "success",
    });
    const stamped = Date.parse(res.body.timestamp);
    expect(stamped).toBeGreaterThanOrEqual(before - 1000);
    expect(stamped).toBeLessThanOrEqual(Date.now() + 1000);
    // UUIDv7's first 48 bits are the Unix milliseconds of generation.
    expect(parseInt(res.body.id.replaceAll("-", "").slice(0, 12), 16)).toBe(stamped);

    const read = await call(`/api/request-id/${res.body.id}`, { key: acct.key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);
  });

  it("metadata is optional and answers null", async () => {
    const acct = await signup();
    const res = await call("/api/request-id", { key: acct.key, body: { purpose: "refund" } });
    expect(res.status).toBe(201);
    expect(res.body.metadata).toBeNull();
  });

  it("every id is different, and the list shows them newest first", async () => {
    const acct = await signup();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await call("/api/request-id", { key: acct.key, body: { purpose: `p${i}` } })).body.id);
    expect(new Set(ids).size).toBe(3);
    const list = await call("/api/request-id", { key: acct.key });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ object: "list", has_more: false });
    expect(list.body.data.map((r: { id: string }) => r.id)).toEqual([...ids].reverse());
    expect(list.body.data[0]).toMatchObject({ object: "request_id", purpose: "p2", status: "success" });

    const page = await call(`/api/request-id?limit=1&starting_after=${ids[2]}`, { key: acct.key });
    expect(page.body.data.map((r: { id: string }) => r.id)).toEqual([ids[1]]);
    expect(page.body.has_more).toBe(true);
    const back = await call(`/api/request-id?limit=1&ending_before=${ids[0]}`, { key: acct.key });
    expect(back.body.data.map((r: { id: string }) => r.id)).toEqual([ids[1]]);
  });

  it("answers 400 with the param for a missing or empty purpose", async () => {
    const acct = await signup();
    const missing = expectError(await call("/api/request-id", { key: acct.key, body: { metadata: { a: "b" } } }), 400, "invalid_request_error", "parameter_missing");
    expect(missing.param).toBe("purpose");
    const empty = expectError(await call("/api/request-id", { key: acct.key, body: { purpose: "  " } }), 400, "invalid_request_error", "parameter_invalid");
    expect(empty.param).toBe("purpose");
  });

  it("refuses metadata with more than 50 keys, nested objects, long values or long keys", async () => {
    const acct = await signup();
    const tooMany = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"]));
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, "v"]));
    expect((await call("/api/request-id", { key: acct.key, body: { purpose: "x", metadata: fifty } })).status).toBe(201);
    const cases: [unknown, string][] = [
      [tooMany, "metadata"],
      [{ customer: { id: "c1" } }, "metadata.customer"],
      [{ list: [1, 2] }, "metadata.list"],
      [{ note: "x".repeat(501) }, "metadata.note"],
      [{ ["k".repeat(41)]: "v" }, "metadata"],
      ["not an object", "metadata"],
    ];
    for (const [metadata, param] of cases) {
      const error = expectError(await call("/api/request-id", { key: acct.key, body: { purpose: "x", metadata } }), 400, "invalid_request_error", "parameter_invalid");
      expect(error.param, JSON.stringify(metadata).slice(0, 60)).toMatch(new RegExp(`^${param.replace(".", "\\.")}`));
    }
    expect((await call("/api/request-id", { key: acct.key, body: { purpose: "x", metadata: { note: "x".repeat(500) } } })).status).toBe(201);
  });
});

describe("GET /api/request-id/{id}", () => {
  it("answers 404 for an unknown id, in UUID form or not", async () => {
    const acct = await signup();
    for (const id of ["019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b", "nope"]) {
      const error = expectError(await call(`/api/request-id/${id}`, { key: acct.key }), 404, "not_found_error", "resource_missing");
      expect(error.param).toBe("id");
      expect(error.message).toContain(id);
    }
  });

  it("needs request_ids:read; a write key may also read", async () => {
    const acct = await signup();
    const created = (await call("/api/request-id", { key: acct.key, body: { purpose: "x" } })).body;
    const users = await createKey(acct, ["users:read"]);
    expectError(await call(`/api/request-id/${created.id}`, { key: users.secret }), 403, "permission_error", "missing_scope");
    expectError(await call("/api/request-id", { key: users.secret, body: { purpose: "x" } }), 403, "permission_error", "missing_scope");
    const writer = await createKey(acct, ["request_ids:write"]);
    expect((await call(`/api/request-id/${created.id}`, { key: writer.secret })).body).toEqual(created);
  });

  it("refuses a cursor that is not a UUID, and both cursors at once", async () => {
    const acct = await signup();
    const bad = expectError(await call("/api/request-id?starting_after=usr_00000000000000000000000000", { key: acct.key }), 400, "invalid_request_error", "invalid_cursor");
    expect(bad.param).toBe("starting_after");
    const badBefore = expectError(await call("/api/request-id?ending_before=nope", { key: acct.key }), 400, "invalid_request_error", "invalid_cursor");
    expect(badBefore.param).toBe("ending_before");
    const id = "019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b";
    expectError(await call(`/api/request-id?starting_after=${id}&ending_before=${id}`, { key: acct.key }), 400, "invalid_request_error", "parameter_conflict");
  });
});
