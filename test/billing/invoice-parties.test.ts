// Seller and buyer (issue 37, DESIGN.md "Books that close"): PATCH /api/account takes the seller's
// business_name, address, tax_id and invoice_footer; users take an address and tax_ids; an invoice
// copies both in the statement that finalizes it and answers them (account_name, account_address,
// account_tax_ids, customer_*, footer); a later change of either never alters an issued invoice,
// its PDF or its hosted page, while a draft shows the live values.
import { describe, expect, it } from "vitest";
import { env } from "../support/env";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { invoicePdfText } from "../support/pdf";

const SELLER = {
  business_name: "Northwind Traders Ltd",
  address: { line1: "1 Main Street", line2: "Suite 4", city: "London", postal_code: "EC1A 1BB", state: "Greater London", country: "gb" },
  tax_id: "GB123456789",
  invoice_footer: "Payment within 30 days. Registered in England No. 01234567.",
};
const BUYER = {
  address: { line1: "Friedrichstraße 10", city: "Berlin", postal_code: "10117", country: "DE" },
  tax_ids: [
    { type: "eu_vat", value: "DE123456789" },
    { type: "gb_vat", value: "GB 987 6543 21" },
  ],
};

const patchAccount = (acct: Account, body: unknown) => call("/api/account", { key: acct.key, method: "PATCH", body });

describe("PATCH /api/account: the seller's details", () => {
  it("sets, shows, keeps what is omitted and removes with null", async () => {
    const acct = await signup("Northwind");
    const before = (await call("/api/account", { key: acct.key })).body;
    expect(before).toMatchObject({ business_name: null, address: null, tax_id: null, invoice_footer: null, event_retention_days: 30 });

    const set = await patchAccount(acct, SELLER);
    expect(set.status, set.text).toBe(200);
    const expected = { ...SELLER, address: { ...SELLER.address, country: "GB" } };
    expect(set.body).toMatchObject(expected);
    expect((await call("/api/account", { key: acct.key })).body).toMatchObject(expected);

    // Omitted fields are kept; the address is replaced whole (a part left out is gone).
    const partial = await patchAccount(acct, { address: { line1: "2 High Street", country: "GB" }, event_retention_days: 40 });
    expect(partial.body).toMatchObject({
      business_name: SELLER.business_name,
      tax_id: SELLER.tax_id,
      invoice_footer: SELLER.invoice_footer,
      event_retention_days: 40,
      address: { line1: "2 High Street", line2: null, city: null, postal_code: null, state: null, country: "GB" },
    });

    const cleared = await patchAccount(acct, { business_name: null, address: null, tax_id: null, invoice_footer: null });
    expect(cleared.body).toMatchObject({ business_name: null, address: null, tax_id: null, invoice_footer: null, name: "Northwind", event_retention_days: 40 });
  });

  it("refuses bad input with a 400 naming the field, and changes nothing", async () => {
    const acct = await signup();
    await patchAccount(acct, SELLER);
    const cases: [unknown, string][] = [
      [{ business_name: "" }, "business_name"],
      [{ business_name: "   " }, "business_name"],
      [{ business_name: "x".repeat(201) }, "business_name"],
      [{ business_name: 7 }, "business_name"],
      [{ address: "1 Main Street" }, "address"],
      [{ address: [] }, "address"],
      [{ address: { line1: "x".repeat(201) } }, "address.line1"],
      [{ address: { line2: 5 } }, "address.line2"],
      [{ address: { city: "x".repeat(101) } }, "address.city"],
      [{ address: { postal_code: "x".repeat(21) } }, "address.postal_code"],
      [{ address: { state: "" } }, "address.state"],
      [{ address: { country: "ZZ" } }, "address.country"],
      [{ address: { country: "GBR" } }, "address.country"],
      [{ address: { country: 44 } }, "address.country"],
      [{ address: { county: "Kent" } }, "address.county"],
      [{ tax_id: "" }, "tax_id"],
      [{ tax_id: "GB<script>" }, "tax_id"],
      [{ tax_id: "1".repeat(51) }, "tax_id"],
      [{ tax_id: 123456789 }, "tax_id"],
      [{ invoice_footer: "" }, "invoice_footer"],
      [{ invoice_footer: "x".repeat(501) }, "invoice_footer"],
      [{ invoice_footer: ["a"] }, "invoice_footer"],
    ];
    for (const [body, param] of cases) {
      const error = expectError(await patchAccount(acct, body), 400, "invalid_request_error");
      expect(error.param, JSON.stringify(body)).toBe(param);
      expect(error.message.toLowerCase(), JSON.stringify(body)).toContain(param.split(".").pop()!.replace("_", " ").split(" ")[0]);
    }
    expect((await call("/api/account", { key: acct.key })).body).toMatchObject({ ...SELLER, address: { ...SELLER.address, country: "GB" } });
  });
});

describe("a user's address and tax_ids", () => {
  it("are taken on POST and PUT /api/users and shown; PUT keeps them when omitted and removes them with null", async () => {
    const acct = await signup();
    const created = await call("/api/users", { key: acct.key, body: { name: "Ada Lovelace", email: "ada@example.com", ...BUYER } });
    expect(created.status, created.text).toBe(201);
    const address = { line1: "Friedrichstraße 10", line2: null, city: "Berlin", postal_code: "10117", state: null, country: "DE" };
    expect(created.body).toMatchObject({ address, tax_ids: BUYER.tax_ids });
    expect((await call(`/api/users/${created.body.id}`, { key: acct.key })).body).toMatchObject({ address, tax_ids: BUYER.tax_ids });
    // A user made without them has none.
    expect(await createUser(acct, { name: "Bo" })).toMatchObject({ address: null, tax_ids: [] });

    const renamed = await call(`/api/users/${created.body.id}`, { key: acct.key, method: "PUT", body: { name: "Ada King", email: "ada@example.com" } });
    expect(renamed.body).toMatchObject({ name: "Ada King", address, tax_ids: BUYER.tax_ids });
    const replaced = await call(`/api/users/${created.body.id}`, {
      key: acct.key,
      method: "PUT",
      body: { name: "Ada King", email: "ada@example.com", tax_ids: [{ type: "au_abn", value: "12 345 678 912" }] },
    });
    expect(replaced.body.tax_ids).toEqual([{ type: "au_abn", value: "12 345 678 912" }]);
    const cleared = await call(`/api/users/${created.body.id}`, { key: acct.key, method: "PUT", body: { name: "Ada King", email: "ada@example.com", address: null, tax_ids: null } });
    expect(cleared.body).toMatchObject({ address: null, tax_ids: [] });
    // customer.updated carries them too.
    const { results } = await env.DB.prepare("SELECT payload FROM events WHERE account_id = ? AND type = 'customer.updated' ORDER BY id").bind(acct.id).all<{ payload: string }>();
    expect(JSON.parse(results[1].payload).data.tax_ids).toEqual([{ type: "au_abn", value: "12 345 678 912" }]);
  });

  it("accepts each type's form, loosely (spaces, dots and hyphens ignored)", async () => {
    const acct = await signup();
    const good = [
      { type: "eu_vat", value: "FRAB123456789" },
      { type: "gb_vat", value: "GB123456789" },
      { type: "us_ein", value: "12-3456789" },
      { type: "au_abn", value: "12345678912" },
      { type: "ca_bn", value: "123456789" },
      { type: "ch_vat", value: "CHE-123.456.789 MWST" },
      { type: "no_vat", value: "123456789MVA" },
      { type: "in_gst", value: "12ABCDE3456FGZH" },
      { type: "jp_cn", value: "1234567891234" },
    ];
    for (const taxId of good) {
      const res = await call("/api/users", { key: acct.key, body: { name: "Ok", email: "ok@example.com", tax_ids: [taxId] } });
      expect(res.status, `${JSON.stringify(taxId)}: ${res.text}`).toBe(201);
    }
  });

  it("refuses bad input with a 400 naming the field", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const five = Array.from({ length: 5 }, () => ({ type: "eu_vat", value: "DE123456789" }));
    const cases: [Record<string, unknown>, string][] = [
      [{ tax_ids: [{ type: "xx_vat", value: "DE123456789" }] }, "tax_ids.0.type"],
      [{ tax_ids: [{ value: "DE123456789" }] }, "tax_ids.0.type"],
      [{ tax_ids: [{ type: "eu_vat", value: "123" }] }, "tax_ids.0.value"],
      [{ tax_ids: [{ type: "eu_vat", value: "DE123456789" }, { type: "us_ein", value: "12-34" }] }, "tax_ids.1.value"],
      [{ tax_ids: [{ type: "in_gst", value: "not a gstin" }] }, "tax_ids.0.value"],
      [{ tax_ids: [{ type: "eu_vat", value: "" }] }, "tax_ids.0.value"],
      [{ tax_ids: [{ type: "eu_vat", value: "DE123456789", verified: true }] }, "tax_ids.0.verified"],
      [{ tax_ids: [...five, five[0]] }, "tax_ids"],
      [{ tax_ids: "DE123456789" }, "tax_ids"],
      [{ tax_ids: ["DE123456789"] }, "tax_ids.0"],
      [{ address: { country: "XX" } }, "address.country"],
      [{ address: { line1: "" } }, "address.line1"],
      [{ address: 1 }, "address"],
    ];
    for (const [extra, param] of cases) {
      for (const res of [
        await call("/api/users", { key: acct.key, body: { name: "Bad", email: "bad@example.com", ...extra } }),
        await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: "Bad", email: "bad@example.com", ...extra } }),
      ]) {
        const error = expectError(res, 400, "invalid_request_error");
        expect(error.param, JSON.stringify(extra)).toBe(param);
      }
    }
    expect((await call(`/api/users/${user.id}`, { key: acct.key })).body).toMatchObject({ name: user.name, address: null, tax_ids: [] });
  });
});

describe("an invoice's seller and buyer", () => {
  it("are copied when it is finalized, and a later change of the account or the user alters neither its JSON, its PDF nor its hosted page", { timeout: 60_000 }, async () => {
    const acct = await signup("Northwind");
    await patchAccount(acct, SELLER);
    const user = await call("/api/users", { key: acct.key, body: { name: "Ada Lovelace", email: "ada@example.com", ...BUYER } });
    const plan = await createPlan(acct, { name: "Team", price: 30 });
    const sub = await subscribed(acct, user.body.id, plan.id);
    const [issued] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    const frozen = {
      account_name: "Northwind Traders Ltd",
      account_address: { ...SELLER.address, country: "GB" },
      account_tax_ids: ["GB123456789"],
      footer: SELLER.invoice_footer,
      customer_name: "Ada Lovelace",
      customer_email: "ada@example.com",
      customer_address: { line1: "Friedrichstraße 10", line2: null, city: "Berlin", postal_code: "10117", state: null, country: "DE" },
      customer_tax_ids: BUYER.tax_ids,
    };
    expect(issued).toMatchObject(frozen);
    const pageBefore = await call(new URL(issued.hosted_invoice_url).pathname);

    // Both parties change after the invoice was issued.
    expect((await patchAccount(acct, { business_name: "Southwind GmbH", address: { line1: "Neue Straße 1", city: "Hamburg", country: "DE" }, tax_id: "DE999999999", invoice_footer: "Zahlbar sofort." })).status).toBe(200);
    const changed = await call(`/api/users/${user.body.id}`, {
      key: acct.key,
      method: "PUT",
      body: { name: "Ada King", email: "countess@example.com", address: { line1: "12 St James's Square", city: "London", country: "GB" }, tax_ids: [{ type: "gb_vat", value: "GB111111111" }] },
    });
    expect(changed.status, changed.text).toBe(200);

    const read = (await call(`/invoices/${issued.id}`, { key: acct.key })).body;
    expect(read).toMatchObject(frozen);
    expect((await call(`/invoices?user_id=${user.body.id}`, { key: acct.key })).body.data[0]).toMatchObject(frozen);

    const text = await invoicePdfText(acct.key, issued.id);
    for (const shown of ["Northwind Traders Ltd", "1 Main Street", "Suite 4", "EC1A 1BB London", "Greater London", "GB", "Tax ID GB123456789", "Ada Lovelace", "ada@example.com", "Friedrichstraße 10", "10117 Berlin", "DE", "EU VAT DE123456789", "GB VAT GB 987 6543 21", SELLER.invoice_footer]) {
      expect(text, shown).toContain(shown);
    }
    for (const gone of ["Southwind", "Neue Straße", "Hamburg", "DE999999999", "Zahlbar", "Ada King", "countess", "St James", "GB111111111"]) expect(text, gone).not.toContain(gone);

    const page = await call(new URL(issued.hosted_invoice_url).pathname);
    expect(page.status).toBe(200);
    expect(page.text).toBe(pageBefore.text);
    for (const shown of ["Northwind Traders Ltd", "1 Main Street", "Tax ID GB123456789", "Friedrichstraße 10", "EU VAT DE123456789", "Payment within 30 days."]) expect(page.text, shown).toContain(shown);
    for (const gone of ["Southwind", "Hamburg", "Ada King", "GB111111111"]) expect(page.text, gone).not.toContain(gone);

    // The next invoice is finalized with the new details.
    const second = await subscribed(acct, user.body.id, plan.id);
    const [next] = (await call(`/invoices?subscription_id=${second.id}`, { key: acct.key })).body.data;
    expect(next).toMatchObject({
      account_name: "Southwind GmbH",
      account_tax_ids: ["DE999999999"],
      footer: "Zahlbar sofort.",
      customer_name: "Ada King",
      customer_tax_ids: [{ type: "gb_vat", value: "GB111111111" }],
      customer_address: { line1: "12 St James's Square", city: "London", country: "GB" },
    });
  });

  it("a draft shows the live values until it is finalized", async () => {
    const acct = await signup("Drafty");
    const user = await createUser(acct, { name: "Grace Hopper", email: "grace@example.com" });
    const id = "in_0000000000000000000000dft1";
    await env.DB.prepare(
      `INSERT INTO invoices (id, account_id, livemode, status, user_id, currency, period_start, period_end, subtotal, discount, total, amount_paid, amount_due, created_at, updated_at)
       VALUES (?, ?, 0, 'draft', ?, 'usd', '2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z', 100, 0, 100, 0, 100, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')`,
    )
      .bind(id, acct.id, user.id)
      .run();
    expect((await call(`/invoices/${id}`, { key: acct.key })).body).toMatchObject({ account_name: "Drafty", account_address: null, account_tax_ids: [], footer: null, customer_name: "Grace Hopper", customer_address: null, customer_tax_ids: [] });
    await patchAccount(acct, SELLER);
    await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: "Grace B. Hopper", email: "grace@example.com", ...BUYER } });
    expect((await call(`/invoices/${id}`, { key: acct.key })).body).toMatchObject({
      account_name: "Northwind Traders Ltd",
      account_tax_ids: ["GB123456789"],
      footer: SELLER.invoice_footer,
      customer_name: "Grace B. Hopper",
      customer_tax_ids: BUYER.tax_ids,
      customer_address: { city: "Berlin", country: "DE" },
    });
  });
});
