// Attacks on the prepared hot paths (src/db/prepared.ts) and on the writes whose record stores the
// committed row (src/middleware/stored-answers.ts): concurrent duplicates, other parameters under
// one key, a replay in an older API version, many tenants on one prepared statement at once, a
// revoked key still cached, and hostile cursors and filters.
import { describe, expect, it } from "vitest";
import { call, expectError, signup } from "../support/http";
import { createKey, createPlan, createUser, subscribed, warm } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { countOf, notificationsOf } from "../support/db";

const PAYOUT = { amount: 700, currency: "usd", payment_method: "card", card_number: CARDS.visa, expiration_month: 12, expiration_year: 2031, cvv: "123" };

describe("writes whose record stores the committed row", () => {
  it("five identical cancels at once: one cancel, one notification, and every answer is the one answer or 409", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await warm(acct.key);
    const answers = await Promise.all(Array.from({ length: 5 }, () => call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "dup-cancel" })));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok.length).toBeGreaterThan(0);
    for (const a of answers) expect([200, 409], a.text).toContain(a.status);
    for (const a of answers.filter((x) => x.status === 409)) expect(a.body.error.code).toBe("idempotency_key_in_use");
    expect(new Set(ok.map((a) => a.text)).size).toBe(1);
    expect(ok[0].body).toMatchObject({ id: sub.id, status: "canceled" });
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_canceled:canceled"]);
    // Afterwards, the key replays the one answer.
    const later = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "dup-cancel" });
    expect(later.text).toBe(ok[0].text);
  });

  it("five identical plan PATCHes at once: the answers agree; other parameters under the key: 422", async () => {
    const acct = await signup();
    const plan = await createPlan(acct);
    await warm(acct.key);
    const answers = await Promise.all(Array.from({ length: 5 }, () => call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Twin" }, idempotencyKey: "dup-plan" })));
    for (const a of answers) expect([200, 409], a.text).toContain(a.status);
    const ok = answers.filter((a) => a.status === 200);
    expect(new Set(ok.map((a) => a.text)).size).toBe(1);
    expect(await countOf("SELECT count(*) AS n FROM idempotency_keys WHERE account_id = ? AND key = 'dup-plan' AND status = 'completed'", acct.id)).toBe(1);
    expectError(await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Other" }, idempotencyKey: "dup-plan" }), 422, "idempotency_error", "idempotency_key_reused");
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key })).body.name).toBe("Twin");
  });

  it("a stored row replays in the replaying request's API version, and a plan named like the stored form is only a name", async () => {
    const acct = await signup();
    const plan = await createPlan(acct, { name: '{"$row":"plan","row":{}}', description: 'quote " backslash \\ emoji 💸' });
    const first = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { description: '{"$row":"subscription"}' }, idempotencyKey: "ver" });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ name: '{"$row":"plan","row":{}}', description: '{"$row":"subscription"}' });
    const old = await call(`/subscription-plans/${plan.id}`, {
      key: acct.key,
      method: "PATCH",
      body: { description: '{"$row":"subscription"}' },
      idempotencyKey: "ver",
      headers: { "Tender-Version": "2026-11-01" },
    });
    expect(old.status, old.text).toBe(200);
    expect(old.headers.get("idempotent-replayed")).toBe("true");
    expect(old.body).toEqual(first.body);
    // A user named like the stored form: its stored answer is plain JSON, replayed as it was.
    const created = await call("/api/users", { key: acct.key, body: { name: '{"$row":"plan"}', email: "row@example.com" }, idempotencyKey: "u-row" });
    const again = await call("/api/users", { key: acct.key, body: { name: '{"$row":"plan"}', email: "row@example.com" }, idempotencyKey: "u-row" });
    expect(again.text).toBe(created.text);
  });
});

describe("prepared statements under many tenants and hostile input", () => {
  it("forty reads, lists and writes of four accounts at once each see their own account only", async () => {
    const accounts = await Promise.all([1, 2, 3, 4].map((i) => signup(`T${i}`)));
    const users = await Promise.all(accounts.map((a, i) => createUser(a, { name: `User ${i}`, email: `u${i}@example.com` })));
    const jobs = accounts.flatMap((a, i) => [
      ...Array.from({ length: 4 }, () => call(`/api/users/${users[i].id}`, { key: a.key }).then((r) => ["read", i, r] as const)),
      ...Array.from({ length: 3 }, () => call("/api/users", { key: a.key }).then((r) => ["list", i, r] as const)),
      ...Array.from({ length: 3 }, (_, n) => call("/payout", { key: a.key, body: { ...PAYOUT, recipient_id: users[i].id }, idempotencyKey: `t${i}-${n}` }).then((r) => ["payout", i, r] as const)),
    ]);
    for (const [kind, i, r] of await Promise.all(jobs)) {
      if (kind === "read") expect(r.body.id).toBe(users[i].id);
      if (kind === "list") expect(r.body.data.map((u: { id: string }) => u.id)).toEqual([users[i].id]);
      if (kind === "payout") expect(r.body.recipient_id, r.text).toBe(users[i].id);
    }
    for (const [i, a] of accounts.entries()) {
      const page = await call(`/payouts?recipient_id=${users[i].id}&status=pending&limit=100`, { key: a.key });
      expect(page.body.data).toHaveLength(3);
      expect((await call(`/payouts?recipient_id=${users[(i + 1) % 4].id}`, { key: a.key })).body.data).toEqual([]);
    }
  });

  it("pages walk forward and back with every limit, and has_more is right at the edges", async () => {
    const acct = await signup();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.unshift((await createUser(acct, { email: `p${i}@example.com` })).id); // newest first
    const one = await call("/api/users?limit=1", { key: acct.key });
    expect(one.body).toMatchObject({ data: [{ id: ids[0] }], has_more: true });
    const all = await call("/api/users?limit=100", { key: acct.key });
    expect(all.body.data.map((u: { id: string }) => u.id)).toEqual(ids);
    expect(all.body.has_more).toBe(false);
    const after = await call(`/api/users?limit=2&starting_after=${ids[1]}`, { key: acct.key });
    expect(after.body).toMatchObject({ data: [{ id: ids[2] }, { id: ids[3] }], has_more: true });
    const last = await call(`/api/users?limit=2&starting_after=${ids[3]}`, { key: acct.key });
    expect(last.body).toMatchObject({ data: [{ id: ids[4] }], has_more: false });
    const before = await call(`/api/users?limit=2&ending_before=${ids[3]}`, { key: acct.key });
    expect(before.body).toMatchObject({ data: [{ id: ids[1] }, { id: ids[2] }], has_more: true });
  });

  it("hostile filters and cursors are values, never SQL", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    await call("/payout", { key: acct.key, body: { ...PAYOUT, recipient_id: user.id } });
    for (const hostile of ["' OR 1=1 --", "usr_x' OR '1'='1", "%' OR account_id != '"]) {
      const res = await call(`/payouts?recipient_id=${encodeURIComponent(hostile)}`, { key: acct.key });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toEqual([]);
      const events = await call(`/api/events?object_id=${encodeURIComponent(hostile)}`, { key: acct.key });
      expect(events.body.data).toEqual([]);
    }
    expectError(await call(`/api/users?starting_after=${encodeURIComponent("usr_' OR 1=1 --")}`, { key: acct.key }), 400, "invalid_request_error", "invalid_cursor");
  });

  it("a revoked key, still cached here, gets 401 on a read, a list, a 404, a PATCH and a cancel", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const victim = await createKey(acct, ["users:write", "plans:write", "subscriptions:write"]);
    await warm(victim.secret);
    expect((await call(`/api/users/${user.id}`, { key: victim.secret })).status).toBe(200);
    expect((await call(`/api/keys/${victim.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    for (const res of await Promise.all([
      call(`/api/users/${user.id}`, { key: victim.secret }),
      call("/api/users", { key: victim.secret }),
      call("/api/users/usr_00000000000000000000000000", { key: victim.secret }),
      call(`/subscription-plans/${plan.id}`, { key: victim.secret, method: "PATCH", body: { name: "Stolen" }, idempotencyKey: "revoked-plan" }),
      call(`/subscriptions/${sub.id}`, { key: victim.secret, method: "DELETE", idempotencyKey: "revoked-cancel" }),
    ])) {
      expectError(res, 401, "authentication_error");
    }
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key })).body.name).toBe(plan.name);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("active");
    expect(await countOf("SELECT count(*) AS n FROM idempotency_keys WHERE account_id = ? AND key LIKE 'revoked-%'", acct.id)).toBe(0);
  });
});
