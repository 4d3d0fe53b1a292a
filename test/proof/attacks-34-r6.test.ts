// Issue 34's "Bad input and money safety", attacked by a reviewer who did not write today's changes:
// the payments' partial indexes (migration 0038) against every query that filters payments by
// status or subscription, and the cron's pages; the 3-D Secure page's ?from=invoice (open redirect,
// another account's or mode's invoice, one-off payments, decided payments, double submits, secrets
// and headers on every answer); and POST /invoices/{id}/pay's 409 charge_in_progress on an
// incomplete subscription's first invoice (other account and mode, scopes, races, replays).
import { applyD1Migrations } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { and, desc, eq, sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { OTHER_SHARD, TEST_SHARD, env, envOf } from "../support/env";
import { BASE, type Account, browse, call, expectError, signup } from "../support/http";
import { createKey, createUser, incompleteInvoice } from "../support/fixtures";
import { cardFields } from "../support/cards";
import { countOf } from "../support/db";
import { createDb } from "../../src/db/client";
import { payments } from "../../src/db/schema";
import { incompleteDuePage } from "../../src/billing/incomplete";
import { incompleteWithPayment } from "../../src/routes/subscriptions/cancel";
import { EXPIRY_BATCH, abandonedAuthentications, duePage, lapsedAuthorizations } from "../../src/payments/intents";

const RETURN = "https://shop.example.com/done";

type Query = { toSQL(): { sql: string; params: unknown[] } };
async function planOf(d1: D1Database, query: Query): Promise<string> {
  const { sql: text, params } = query.toSQL();
  const rows = await d1.prepare(`EXPLAIN QUERY PLAN ${text}`).bind(...params).all<{ detail: string }>();
  return rows.results.map((r) => r.detail).join(" | ");
}
/** A plan that reads payments only through a seek (SEARCH), never a walk of a whole table or index. */
const seeksPayments = (plan: string) => {
  expect(plan).not.toMatch(/SCAN payments/);
  expect(plan).toMatch(/SEARCH payments USING/);
};

describe("migration 0038: the payments' partial indexes", () => {
  it("the incomplete-subscription cron and DELETE of an incomplete subscription seek the waiting payment (no walk of every subscription payment)", async () => {
    const db = createDb(env.DB);
    for (const after of [null, { createdAt: "2026-11-20T12:00:00.000Z", id: "sub_01m8000000000000000000000" }]) {
      const plan = await planOf(env.DB, incompleteDuePage(db, Date.parse("2026-11-27T12:00:00Z"), after));
      seeksPayments(plan);
      expect(plan).toMatch(/SEARCH payments USING INDEX payments_subscription \(account_id=\? AND livemode=\? AND subscription_id=\?/);
    }
    const plan = await planOf(env.DB, incompleteWithPayment(db, { accountId: "acct_x", livemode: false, keyId: "key_x" }, "sub_x"));
    seeksPayments(plan);
    expect(plan).toMatch(/SEARCH payments USING INDEX payments_subscription \(account_id=\? AND livemode=\? AND subscription_id=\?/);
  });

  it("the other queries that filter payments by status or subscription still seek, on both shards: the expiry cron's pages, a subscription's list, a status inside an account", async () => {
    for (const shard of [TEST_SHARD, OTHER_SHARD]) await plansOn(envOf(shard).DB);
  });
  async function plansOn(d1: D1Database) {
    const db = createDb(d1);
    const now = Date.parse("2026-11-27T12:00:00Z");
    for (const cursor of [null, { at: "2026-11-20T12:00:00.000Z", id: "pay_01m8000000000000000000000" }]) {
      expect(await planOf(d1, duePage(db, lapsedAuthorizations(now), payments.captureBefore, cursor))).toMatch(/SEARCH payments USING INDEX payments_capture_due/);
      // The abandoned ones' first page walks the partial index, which holds the waiting payments only (as the old (status, …) index's search did).
      expect(await planOf(d1, duePage(db, abandonedAuthentications(now), payments.createdAt, cursor))).toMatch(/payments USING INDEX payments_action_waiting/);
    }
    const mine = and(eq(payments.accountId, "acct_x"), eq(payments.livemode, false));
    seeksPayments(await planOf(d1, db.select().from(payments).where(and(mine, eq(payments.subscriptionId, "sub_x"), eq(payments.status, "requires_action"))).orderBy(desc(payments.id)).limit(11)));
    seeksPayments(await planOf(d1, db.select().from(payments).where(and(mine, eq(payments.status, "requires_capture"))).orderBy(desc(payments.id)).limit(11)));
    seeksPayments(await planOf(d1, db.select({ n: sql`count(*)` }).from(payments).where(and(mine, sql`${payments.status} IN ('completed', 'partially_refunded', 'refunded')`))));
    seeksPayments(await planOf(d1, incompleteDuePage(db, now, null)));
  }

  it("applies on a shard holding payments: each partial index holds exactly its rows, and every row is kept", { timeout: 30_000 }, async () => {
    type Migrations = Parameters<typeof applyD1Migrations>[1];
    const scratch = (env as unknown as { MIGRATION_SCRATCH: D1Database }).MIGRATION_SCRATCH;
    const migrations = (env as unknown as { TEST_MIGRATIONS: Migrations }).TEST_MIGRATIONS;
    await applyD1Migrations(scratch, migrations.filter((m) => m.name < "0038"));
    const columns = (await scratch.prepare("SELECT name, type, \"notnull\" AS nn, dflt_value AS dflt FROM pragma_table_info('payments')").all<{ name: string; type: string; nn: number; dflt: string | null }>()).results;
    const rows: Record<string, unknown>[] = [
      { id: "pay_m38_capture", status: "requires_capture", capture_before: "2026-11-20T00:00:00.000Z", amount_capturable: 500 },
      { id: "pay_m38_action", status: "requires_action", subscription_id: "sub_m38" },
      { id: "pay_m38_done", status: "completed", subscription_id: "sub_m38", amount_received: 500 },
      { id: "pay_m38_oneoff", status: "completed", amount_received: 500 },
    ];
    for (const row of rows) {
      const values: Record<string, unknown> = { account_id: "acct_m38", livemode: 0, amount: 500, currency: "usd", created_at: "2026-11-01T00:00:00.000Z", ...row, charge_reference: `ref_${row.id}` };
      for (const c of columns) if (c.nn && c.dflt === null && !(c.name in values)) values[c.name] = /INT/i.test(c.type) ? 0 : "x";
      const names = Object.keys(values);
      await scratch.prepare(`INSERT INTO payments (${names.join(", ")}) VALUES (${names.map(() => "?").join(", ")})`).bind(...names.map((n) => values[n])).run();
    }
    await applyD1Migrations(scratch, migrations.filter((m) => m.name.startsWith("0038")));
    const through = async (index: string, where: string) =>
      (await scratch.prepare(`SELECT id FROM payments INDEXED BY ${index} WHERE ${where} ORDER BY id`).all<{ id: string }>()).results.map((r) => r.id);
    expect(await through("payments_capture_due", "status = 'requires_capture' AND capture_before <= '2026-11-27'")).toEqual(["pay_m38_capture"]);
    expect(await through("payments_action_waiting", "status = 'requires_action' AND created_at <= '2026-11-27'")).toEqual(["pay_m38_action"]);
    expect(await through("payments_subscription", "account_id = 'acct_m38' AND livemode = 0 AND subscription_id = 'sub_m38'")).toEqual(["pay_m38_action", "pay_m38_done"]);
    expect((await scratch.prepare("SELECT count(*) AS n FROM payments").first<{ n: number }>())!.n).toBe(4);
  });

  it("the expiry cron's pages find every due authorization and abandoned 3-D Secure payment once, across pages of equal timestamps, and never a moved account's rows", async () => {
    const acct = await signup("Pages R6");
    const ada = await createUser(acct, { name: "Ada", email: "ada@example.com" });
    const made = await call("/payments", { key: acct.key, body: { user_id: ada.id, amount: 700, currency: "usd", capture_method: "manual", ...cardFields("4242424242424242") } });
    expect(made.status, made.text).toBe(201);
    expect(made.body.status).toBe("requires_capture");
    // An account that moved away from this shard (its rows here are the copy the move leaves until it deletes them).
    await env.DB.prepare("INSERT INTO accounts (id, name, email, created_at, moved_to) VALUES ('acct_r6moved', 'Moved', 'moved@example.com', '2020-01-01T00:00:00.000Z', 1)").run();
    const at = "2020-01-01T00:00:00.000Z";
    const copies = EXPIRY_BATCH + 7;
    const cols = (await env.DB.prepare("SELECT name FROM pragma_table_xinfo('payments') WHERE hidden = 0").all<{ name: string }>()).results.map((r) => r.name);
    const db = createDb(env.DB);
    const now = Date.parse("2020-01-09T00:00:00Z");
    for (const [status, due, order] of [
      ["requires_capture", lapsedAuthorizations(now), payments.captureBefore],
      ["requires_action", abandonedAuthentications(now), payments.createdAt],
    ] as const) {
      // EXPIRY_BATCH + 7 copies of the payment in this status, all due at the same instant and made at the same instant, and two of the moved account.
      const picked = cols
        .map((c) =>
          c === "id" ? "?1 || printf('%03d', n.i)" : c === "charge_reference" ? "?1 || '-ref-' || n.i" : c === "processor_reference" ? "?1 || '-pi-' || n.i" : c === "capture_before" || c === "created_at" ? "?2" : c === "status" ? "?5" : c === "account_id" ? "CASE WHEN n.i > ?3 THEN 'acct_r6moved' ELSE account_id END" : c,
        )
        .join(", ");
      await env.DB.prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?3 + 2)
         INSERT INTO payments (${cols.join(", ")}) SELECT ${picked} FROM payments, n WHERE payments.id = ?4`,
      )
        .bind(`pay_r6${status.slice(-6)}`, at, copies, made.body.id, status)
        .run();
      const seen: string[] = [];
      let after: { at: string | null; id: string } | null = null;
      for (let page = 0; page < 100; page++) {
        const rows = await duePage(db, due, order, after);
        seen.push(...rows.map((r) => r.id));
        if (rows.length < EXPIRY_BATCH) break;
        const last = rows[rows.length - 1];
        after = { at: order === payments.captureBefore ? last.captureBefore : last.createdAt, id: last.id };
      }
      const mine = seen.filter((id) => id.startsWith(`pay_r6${status.slice(-6)}`));
      expect(mine.length, status).toBe(copies);
      expect(new Set(mine).size, status).toBe(copies);
      expect(mine.every((id) => Number(id.slice(-3)) <= copies), status).toBe(true);
    }
    await env.DB.prepare("DELETE FROM payments WHERE id LIKE 'pay_r6%'").run();
    await env.DB.prepare("DELETE FROM accounts WHERE id = 'acct_r6moved'").run();
  });
});

let acct: Account & { liveKey: string };
let other: Account & { liveKey: string };
beforeAll(async () => {
  acct = await signup("Invoice Marker R6");
  other = await signup("Other Shop R6");
});

/** A subscription whose first charge asked for 3-D Secure (return_url given): incomplete, its first invoice open. */
const incomplete = (owner: Account = acct) => incompleteInvoice(owner, RETURN);

const pathOf = (url: string) => new URL(url).pathname;
const secretOf = (url: string) => pathOf(url).split("/").pop()!;
/** Every hosted answer's headers: no framing, no caching, no Referer (a 303 whose Location holds a page secret included). */
function expectHostedHeaders(res: { headers: Headers }, what: string) {
  expect(res.headers.get("content-security-policy"), what).toContain("frame-ancestors 'none'");
  expect(res.headers.get("cache-control"), what).toBe("no-store");
  expect(res.headers.get("referrer-policy"), what).toBe("no-referrer");
}

describe("?from=invoice on the 3-D Secure page", () => {
  it("no query sends the payer off this origin or to another invoice: a doubled, encoded or foreign marker, and extra parameters, lead to the payment's own invoice or its usual place", async () => {
    const mine = await incomplete();
    const theirs = await incomplete(other);
    const own = `${mine.invoice.hosted_invoice_url}?payment_id=${mine.payment}`;
    const path = pathOf(mine.challenge);
    // The first submit carries a doubled marker and another invoice's id and secret.
    const first = await browse(`${path}/complete?from=invoice&from=https://evil.example/x&invoice=${theirs.invoice.id}&secret=${secretOf(theirs.invoice.hosted_invoice_url)}&return_url=https://evil.example`, {});
    expect(first.status).toBe(303);
    expect(first.location).toBe(own);
    // Decided: every variant answers its own invoice (the marker), or return_url (anything else), never another place.
    const variants: [string, string][] = [
      ["?from=invoice", own],
      ["?from=invoice&from=//evil.example", own],
      ["?from=%69nvoice", own],
      ["?from=https%3A%2F%2Fevil.example", `${RETURN}?payment_id=${mine.payment}`],
      ["?from=INVOICE", `${RETURN}?payment_id=${mine.payment}`],
      ["?from=invoice/../../evil", `${RETURN}?payment_id=${mine.payment}`],
      ["?from[]=invoice", `${RETURN}?payment_id=${mine.payment}`],
    ];
    for (const [query, expected] of variants) {
      for (const button of ["complete", "fail"]) {
        const res = await browse(`${path}/${button}${query}`, {});
        expect(res.status, query).toBe(303);
        expect(res.location, query).toBe(expected);
      }
      const shown = await browse(`${path}${query}`);
      expect(shown.status, query).toBe(200);
      expect(shown.text, query).not.toContain("evil.example");
      expect(shown.text, query).not.toContain(theirs.invoice.id);
    }
    // The Fail after Complete changed nothing: one completed payment, the subscription active, theirs untouched.
    expect((await call(`/payments/${mine.payment}`, { key: acct.key })).body.status).toBe("completed");
    expect((await call(`/subscriptions/${mine.sub}`, { key: acct.key })).body.status).toBe("active");
    expect((await call(`/subscriptions/${theirs.sub}`, { key: other.key })).body.status).toBe("incomplete");
  });

  it("the marker with another account's payment secret, or a payment id under another payment's secret, answers 404 and decides nothing", async () => {
    const mine = await incomplete();
    const theirs = await incomplete(other);
    for (const url of [`/pay/authenticate/${theirs.payment}/${secretOf(mine.challenge)}`, `/pay/authenticate/${mine.payment}/${secretOf(theirs.challenge)}`]) {
      const page = await browse(`${url}?from=invoice`);
      expect(page.status).toBe(404);
      expectHostedHeaders(page, url);
      for (const button of ["complete", "fail"]) expect((await browse(`${url}/${button}?from=invoice`, {})).status).toBe(404);
    }
    expect((await call(`/payments/${mine.payment}`, { key: acct.key })).body.status).toBe("requires_action");
    expect((await call(`/payments/${theirs.payment}`, { key: other.key })).body.status).toBe("requires_action");
  });

  it("the challenge opened from the invoice's page, waiting, carries no secret but its own: not the invoice page's, no key, no card", async () => {
    const d = await incomplete();
    const page = await browse(`${pathOf(d.challenge)}?from=invoice`);
    expect(page.status).toBe(200);
    expectHostedHeaders(page, "challenge");
    expect(page.text).not.toContain(secretOf(d.invoice.hosted_invoice_url));
    expect(page.text).not.toMatch(/sk_(test|live)_|rk_(test|live)_|client_secret|4000002760003184|2760003184/);
    expect(page.text).not.toContain(RETURN);
  });

  it("every answer of the marked page carries the hosted headers: the 303s that hold the invoice page's secret, the result page, a double submit", async () => {
    const d = await incomplete();
    const path = pathOf(d.challenge);
    const done = await browse(`${path}/complete?from=invoice`, {});
    expect(done.status).toBe(303);
    expect(done.location).toContain(secretOf(d.invoice.hosted_invoice_url));
    expectHostedHeaders(done, "Complete's 303");
    const again = await browse(`${path}/complete?from=invoice`, {});
    expect(again.location).toBe(done.location);
    expectHostedHeaders(again, "a second Complete's 303");
    const result = await browse(`${path}?from=invoice`);
    expect(result.status).toBe(200);
    expectHostedHeaders(result, "the result page");
    // The merchant's own flow's 303 (to return_url) too.
    const merchant = await browse(`${path}/complete`, {});
    expect(merchant.location).toBe(`${RETURN}?payment_id=${d.payment}`);
    expectHostedHeaders(merchant, "return_url's 303");
  });

  it("a payment of an account moved to the other shard: the marked challenge finds it there and sends its payer to its invoice's page, which shows it paid", { timeout: 60_000 }, async () => {
    const mover = await signup("Moving Shop R6");
    const d = await incomplete(mover);
    const moved = await call(`/api/accounts/${mover.id}/move`, { body: { to_shard: 1 - Number((await call("/api/account", { key: mover.key })).headers.get("tender-shard")), drain_seconds: 0 } });
    expect(moved.status, moved.text).toBe(200);
    const link = /<a class="button" href="([^"]+)">\s*Continue to your bank/.exec((await browse(d.page)).text)?.[1]?.replace(/&amp;/g, "&");
    expect(link).toBe(`${d.challenge}?from=invoice`);
    const done = await browse(`${pathOf(link!)}/complete?from=invoice`, {});
    expect(done.status, done.text).toBe(303);
    expect(done.location).toBe(`${d.invoice.hosted_invoice_url}?payment_id=${d.payment}`);
    expect((await browse(done.location!)).text).toContain("30.00 USD paid");
    expect((await call(`/subscriptions/${d.sub}`, { key: mover.key })).body.status).toBe("active");
  });
});

describe("POST /invoices/{id}/pay on an incomplete subscription's first invoice", () => {
  it("another account's key, the live key of the same account and a key without invoices scopes learn nothing: 404, 404, 403", async () => {
    const d = await incomplete();
    for (const key of [other.key, other.liveKey, acct.liveKey]) {
      const res = await call(`/invoices/${d.invoice.id}/pay`, { key, method: "POST" });
      expectError(res, 404, "not_found_error");
      expect(res.text).not.toContain(d.payment);
      expect(res.text).not.toContain(secretOf(d.challenge));
    }
    const restricted = await createKey(acct, ["payments:read", "subscriptions:write"]);
    const refused = await call(`/invoices/${d.invoice.id}/pay`, { key: restricted.secret, method: "POST" });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.text).not.toContain(d.payment);
    expect(refused.text).not.toContain(secretOf(d.challenge));
    // invoices:write (which reads the invoice, its hosted_invoice_url and so the page that links the challenge) is told.
    const writer = await createKey(acct, ["invoices:write"]);
    const told = expectError(await call(`/invoices/${d.invoice.id}/pay`, { key: writer.secret, method: "POST" }), 409, "invalid_request_error", "charge_in_progress");
    expect(told.message).toContain(d.payment);
    expect((await call(`/payments/${d.payment}`, { key: acct.key })).body.status).toBe("requires_action");
  });

  it("racing the payer's Complete: one payment, completed once, the invoice paid once, and the POST answers a clear 409", async () => {
    const d = await incomplete();
    const path = pathOf(d.challenge);
    const [paid, pressed] = await Promise.all([
      call(`/invoices/${d.invoice.id}/pay`, { key: acct.key, method: "POST", idempotencyKey: `race-${d.invoice.id}` }),
      exports.default.fetch(`${BASE}${path}/complete?from=invoice`, { method: "POST", redirect: "manual" }).then(async (r) => (await r.text(), r.status)),
    ]);
    expect(pressed).toBe(303);
    expect(paid.status, paid.text).toBe(409);
    expect(["charge_in_progress", "invoice_paid", "subscription_changed"]).toContain(paid.body.error.code);
    expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ?", d.sub)).toBe(1);
    expect((await call(`/payments/${d.payment}`, { key: acct.key })).body).toMatchObject({ status: "completed", amount_received: 3000 });
    expect((await call(`/invoices/${d.invoice.id}`, { key: acct.key })).body).toMatchObject({ status: "paid", amount_paid: 3000, payment_id: d.payment });
    expect(await countOf("SELECT count(*) AS n FROM events WHERE account_id = ? AND type = 'invoice.paid' AND object_id = ?", acct.id, d.invoice.id)).toBe(1);
    // Afterwards the invoice is paid: 409 invoice_paid, nothing charged.
    expectError(await call(`/invoices/${d.invoice.id}/pay`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "invoice_paid");
    expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ?", d.sub)).toBe(1);
  });

  it("the Idempotency-Key of a 409 charge_in_progress, sent again once the payment completed, charges nothing and says where the invoice stands", async () => {
    const d = await incomplete();
    const key = `r6-replay-${d.invoice.id}`;
    expectError(await call(`/invoices/${d.invoice.id}/pay`, { key: acct.key, method: "POST", idempotencyKey: key }), 409, "invalid_request_error", "charge_in_progress");
    expect((await browse(`${pathOf(d.challenge)}/complete`, {})).status).toBe(303);
    const again = await call(`/invoices/${d.invoice.id}/pay`, { key: acct.key, method: "POST", idempotencyKey: key });
    expect(again.status, again.text).toBe(409);
    // Either the first answer replayed (as Stripe replays), or today's: the invoice is paid. Never a charge.
    if (again.headers.get("idempotent-replayed") === "true") expect(again.body.error.code).toBe("charge_in_progress");
    else expect(again.body.error.code).toBe("invoice_paid");
    expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ?", d.sub)).toBe(1);
    expect((await call(`/invoices/${d.invoice.id}`, { key: acct.key })).body).toMatchObject({ status: "paid", amount_paid: 3000 });
  });

  it("after Fail (the subscription incomplete_expired, its invoice void): 409 invoice_not_open, nothing charged", async () => {
    const d = await incomplete();
    expect((await browse(`${pathOf(d.challenge)}/fail`, {})).status).toBe(303);
    expectError(await call(`/invoices/${d.invoice.id}/pay`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "invoice_not_open");
    expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ?", d.sub)).toBe(1);
  });
});
