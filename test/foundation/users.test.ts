import { describe, expect, it } from "vitest";
import { call, expectError, ISO_MS, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { eventsOf } from "../support/db";

describe("POST /api/users", () => {
  it("creates a user and records customer.created with the user as the API returned it", async () => {
    const acct = await signup();
    const res = await call("/api/users", { key: acct.key, body: { name: "Ada Lovelace", email: "ada@example.com" } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ object: "user", name: "Ada Lovelace", email: "ada@example.com" });
    expect(res.body.id).toMatch(/^usr_[0-9a-z]{26}$/);
    expect(res.body.created_at).toMatch(ISO_MS);
    expect(res.body.updated_at).toBe(res.body.created_at);

    const events = await eventsOf(acct.id, "customer.created");
    expect(events).toHaveLength(1);
    expect(events[0].id).toMatch(/^evt_/);
    expect(events[0].body).toEqual({ id: events[0].id, type: "customer.created", data: res.body, created_at: expect.stringMatching(ISO_MS), object_id: res.body.id, sequence: 1, livemode: false });
  });

  it("trims the name and email", async () => {
    const acct = await signup();
    const res = await call("/api/users", { key: acct.key, body: { name: "  Grace  ", email: " grace@example.com " } });
    expect(res.body).toMatchObject({ name: "Grace", email: "grace@example.com" });
  });

  it("answers 400 with the param for a bad email, a missing or empty name, or a wrong type", async () => {
    const acct = await signup();
    const cases: [unknown, string, string][] = [
      [{ name: "Ada", email: "not-an-email" }, "email", "parameter_invalid"],
      [{ name: "Ada" }, "email", "parameter_missing"],
      [{ email: "ada@example.com" }, "name", "parameter_missing"],
      [{ name: "", email: "ada@example.com" }, "name", "parameter_invalid"],
      [{ name: 42, email: "ada@example.com" }, "name", "parameter_invalid"],
      [{ name: "x".repeat(201), email: "ada@example.com" }, "name", "parameter_invalid"],
    ];
    for (const [body, param, code] of cases) {
      const error = expectError(await call("/api/users", { key: acct.key, body }), 400, "invalid_request_error", code);
      expect(error.param, JSON.stringify(body)).toBe(param);
      expect(error.message).toContain(param);
    }
    expect(await eventsOf(acct.id, "customer.created")).toHaveLength(0);
  });
});

describe("GET /api/users/{id}", () => {
  it("reads the user as created", async () => {
    const acct = await signup();
    const created = await createUser(acct);
    const res = await call(`/api/users/${created.id}`, { key: acct.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(created);
  });

  it("answers 404 with the id for an unknown user", async () => {
    const acct = await signup();
    const error = expectError(await call("/api/users/usr_00000000000000000000000000", { key: acct.key }), 404, "not_found_error", "resource_missing");
    expect(error.param).toBe("id");
    expect(error.message).toContain("usr_00000000000000000000000000");
  });
});

describe("PUT /api/users/{id}", () => {
  it("replaces name and email, and records customer.updated with the user as the API returned it", async () => {
    const acct = await signup();
    const created = await createUser(acct, { name: "Ada", email: "ada@example.com" });
    const res = await call(`/api/users/${created.id}`, { key: acct.key, method: "PUT", body: { name: "Ada King", email: "ada.king@example.com" } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: created.id, object: "user", name: "Ada King", email: "ada.king@example.com" });
    expect(res.body.created_at).toBe((created as any).created_at);
    expect(res.body.updated_at).toMatch(ISO_MS);
    expect(Date.parse(res.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(res.body.created_at));

    expect((await call(`/api/users/${created.id}`, { key: acct.key })).body).toEqual(res.body);
    const events = await eventsOf(acct.id, "customer.updated");
    expect(events).toHaveLength(1);
    expect(events[0].body).toEqual({ id: events[0].id, type: "customer.updated", data: res.body, created_at: expect.stringMatching(ISO_MS), object_id: res.body.id, sequence: expect.any(Number), livemode: false });
  });

  it("needs both fields: a partial body is 400 and changes nothing", async () => {
    const acct = await signup();
    const created = await createUser(acct);
    const error = expectError(await call(`/api/users/${created.id}`, { key: acct.key, method: "PUT", body: { name: "Only Name" } }), 400, "invalid_request_error", "parameter_missing");
    expect(error.param).toBe("email");
    expect((await call(`/api/users/${created.id}`, { key: acct.key })).body).toEqual(created);
    expect(await eventsOf(acct.id, "customer.updated")).toHaveLength(0);
  });

  it("answers 404 for an unknown user and records no event", async () => {
    const acct = await signup();
    const error = expectError(
      await call("/api/users/usr_00000000000000000000000000", { key: acct.key, method: "PUT", body: { name: "X", email: "x@example.com" } }),
      404,
      "not_found_error",
      "resource_missing",
    );
    expect(error.param).toBe("id");
    expect(await eventsOf(acct.id, "customer.updated")).toHaveLength(0);
  });
});

describe("GET /api/users", () => {
  it("pages newest first with limit, starting_after and ending_before", async () => {
    const acct = await signup();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createUser(acct, { name: `User ${i}`, email: `u${i}@example.com` })).id);
    const newestFirst = [...ids].reverse();

    const all = await call("/api/users", { key: acct.key });
    expect(all.body.data.map((u: { id: string }) => u.id)).toEqual(newestFirst);
    expect(all.body.has_more).toBe(false);

    const first = await call("/api/users?limit=2", { key: acct.key });
    expect(first.body).toMatchObject({ object: "list", has_more: true });
    expect(first.body.data.map((u: { id: string }) => u.id)).toEqual(newestFirst.slice(0, 2));
    const second = await call(`/api/users?limit=2&starting_after=${newestFirst[1]}`, { key: acct.key });
    expect(second.body.data.map((u: { id: string }) => u.id)).toEqual(newestFirst.slice(2, 4));
    expect(second.body.has_more).toBe(true);
    const last = await call(`/api/users?limit=2&starting_after=${newestFirst[3]}`, { key: acct.key });
    expect(last.body.data.map((u: { id: string }) => u.id)).toEqual(newestFirst.slice(4));
    expect(last.body.has_more).toBe(false);
    const back = await call(`/api/users?limit=2&ending_before=${newestFirst[4]}`, { key: acct.key });
    expect(back.body.data.map((u: { id: string }) => u.id)).toEqual(newestFirst.slice(2, 4));
    expect(back.body.has_more).toBe(true);
  });

  it("refuses limit 0 and 101, a non-numeric limit, a bad cursor and both cursors", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    for (const limit of ["0", "101", "ten", "1.5"]) {
      const error = expectError(await call(`/api/users?limit=${limit}`, { key: acct.key }), 400, "invalid_request_error", "parameter_invalid");
      expect(error.param).toBe("limit");
    }
    expect((await call("/api/users?limit=100", { key: acct.key })).status).toBe(200);
    expect((await call("/api/users?limit=1", { key: acct.key })).status).toBe(200);
    const cursor = expectError(await call("/api/users?starting_after=key_00000000000000000000000000", { key: acct.key }), 400, "invalid_request_error", "invalid_cursor");
    expect(cursor.param).toBe("starting_after");
    const empty = expectError(await call("/api/users?starting_after=", { key: acct.key }), 400, "invalid_request_error", "invalid_cursor");
    expect(empty.param).toBe("starting_after");
    expectError(await call(`/api/users?starting_after=${user.id}&ending_before=${user.id}`, { key: acct.key }), 400, "invalid_request_error", "parameter_conflict");
  });
});
