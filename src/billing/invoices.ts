// Invoices: building, finalizing, numbering and settling an invoice, as statements and events for
// the caller's own batch (a subscription's first charge, a period's settlement, a void). Every
// subscription charge is for an invoice; an invoice of a billing period is unique per
// (subscription, period), so each attempt at a period (the renewal, its dunning retries, a
// past-due card update, Pay now) charges and names the same invoice.
//
//   issueInvoice   a new invoice from its lines, in one batch: created as a draft, finalized
//                  (numbered), and, when the batch also records its charge, paid or failed. Later
//                  phases (prorations invoiced at once, a trial's end, a metered period) call it
//                  with their lines.
//   settleInvoice  an existing invoice's charge attempt: paid, or still open / uncollectible.
//
// `number` is gap-free per account and mode: the finalizing INSERT takes the account and mode's
// MAX(number_sequence) + 1 itself. D1 runs one write at a time, so numbers are taken in commit
// order, and the unique index (account_id, livemode, number_sequence) refuses a second taker.
// Totals come from the lines (src/domain/invoice-math.ts): subtotal = the sum of the lines,
// total = subtotal - discount + exclusive tax, never re-rounded. The tax (each line's per rate,
// src/domain/tax.ts) is computed here, when the invoice is made, and stored on it and its lines:
// never recomputed, so a rate archived or a plan re-taxed later never alters an issued invoice.
//
// What an invoice says about its parties (the buyer: the user's name, email, address and tax ids;
// the seller: the account's business name or name, email, address, tax id and invoice footer) is
// copied onto it by the statement that finalizes it (`issuedParties`), in the same batch, and never
// changes after: a change later never alters an issued invoice, its JSON, its PDF or its hosted
// page. A draft shows the live values until then (as Stripe's `customer_name` does). The coupon's
// name and the user's test clock are copied when the invoice is made.
//
// An invoice's own times (created_at, finalized_at, paid_at) are billing time: the user's test
// clock's when it has one (the moment the clock's renewal fell due), else the wall clock, as
// Stripe dates a clocked invoice. Its events and updated_at keep the wall clock.
//
// An invoice is answered (by the API and as event data) by one serializer, in SQL
// (`INVOICE_JSON`): its lines live in their own table, and a batch that writes an invoice can
// read it back as committed (its number included) for its events.
import { type SQL, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { rawStatement, type Statement } from "../db/batch";
import type { Tenant } from "../db/scope";
import { invoiceLines, invoices, type plans } from "../db/schema";
import type { CouponValue } from "../domain/discounts";
import { newId } from "../domain/ids";
import { invoiceTotals, type InvoiceTotals } from "../domain/invoice-math";
import type { PostalAddress, TaxIdValue } from "../domain/parties";
import { type TaxAmount, type TaxRateValue, formatPercentage } from "../domain/tax";
import { isoTime } from "../lib/clock";
import { HOSTED_INVOICE_PATH, newPageSecret } from "../pages/links";
import { planUnitAmountDecimal } from "./pricing";
import { type EmittedEvent, emitEvent, eventDataSource } from "../webhooks/outbox";

export type InvoiceRow = typeof invoices.$inferSelect;
export type InvoiceStatus = InvoiceRow["status"];
export const INVOICE_STATUSES = ["draft", "open", "paid", "uncollectible", "void"] as const satisfies readonly InvoiceStatus[];
export type InvoiceLineType = (typeof invoiceLines.$inferSelect)["type"];

/** A line of a new invoice. */
export interface InvoiceLineInput {
  /** The line's id, when the batch names it (a credit note of it); else a new one. */
  id?: string;
  type: InvoiceLineType;
  description: string;
  quantity: number;
  /** The exact unit price in minor units (up to 12 decimals), or null when the line has none (tiers). */
  unitAmountDecimal: string | null;
  /** Integer minor units, already rounded once; negative for a credit. */
  amount: number;
  proration: boolean;
  /** Whether the invoice's discount applies to it (default: not a proration). */
  discountable?: boolean;
  periodStart: string;
  periodEnd: string;
}

/** A new invoice: whose it is, what it bills, and its lines. */
export interface InvoiceInput {
  /** Made by the caller, so the payment of the same batch can name it (newId("invoice", at)). */
  id: string;
  tenant: Tenant;
  subscriptionId: string | null;
  /** The subscription's billing period it bills (unique with the subscription), or null. */
  periodIndex: number | null;
  userId: string | null;
  currency: string;
  periodStart: string;
  periodEnd: string;
  lines: InvoiceLineInput[];
  /** The coupon that applies (phase B/C); none by default, so the discount is 0. */
  coupon?: CouponValue | null;
  /** The id of the coupon the discount comes from: the invoice names it (and copies its name) when it has a discount. */
  couponId?: string | null;
  /**
   * The tax rates on its lines (the subscription's, else its plan's: src/billing/tax.ts); none by
   * default. A carried credit (type credit) moves a balance, sells nothing, and carries no tax.
   */
  taxRates?: readonly TaxRateValue[];
  /** The user's balance when the invoice was claimed, and what it takes from it (a credit, positive). */
  balance?: { starting: number; applied: number };
}

/**
 * What happened to the invoice in the batch that writes it:
 * - `draft`: left a draft (no number), to be finalized later (finalizeInvoice);
 * - `open`: finalized, not charged in this batch;
 * - `paid`: finalized and paid by `paymentId`;
 * - `failed`: finalized, its charge `paymentId` declined, and left `open` (to be retried),
 *   `uncollectible` (the retries are used up) or `void` (nothing can ever pay it: a declined first
 *   charge, which creates no subscription).
 */
export type InvoiceOutcome =
  | { kind: "draft" }
  | { kind: "open" }
  | { kind: "paid"; /** null: nothing was due (a discount took all of it), so nothing was charged. */ paymentId: string | null }
  | { kind: "failed"; paymentId: string; status: "open" | "uncollectible" | "void" };

/** The totals of an invoice from its lines (and coupon). */
export function totalsOf(input: Pick<InvoiceInput, "currency" | "lines" | "coupon" | "taxRates" | "balance">): InvoiceTotals {
  const rates = input.taxRates ?? [];
  return invoiceTotals({
    currency: input.currency,
    lines: input.lines.map((l) => ({ amount: l.amount, proration: l.proration, discountable: l.discountable, taxRates: l.type === "credit" ? [] : rates })),
    coupon: input.coupon ?? null,
    // Only what the claim took from the balance is the invoice's to use: the rest stays on the balance.
    startingCreditBalance: input.balance?.applied ?? 0,
  });
}

/** The one line of a subscription's billing period: `<quantity> × <plan name>`. */
export function subscriptionLine(
  plan: Pick<typeof plans.$inferSelect, "name" | "pricingModel" | "unitAmount" | "unitAmountDecimal">,
  quantity: number,
  amount: number,
  periodStart: string,
  periodEnd: string,
): InvoiceLineInput {
  return {
    type: "subscription",
    description: `${quantity} × ${plan.name}`,
    quantity,
    // A fixed plan's price is the unit price; tiers price the line as a whole.
    unitAmountDecimal: planUnitAmountDecimal(plan),
    amount,
    proration: false,
    periodStart,
    periodEnd,
  };
}

/** The line of a metered period: its aggregated usage, priced through the plan. */
export function usageLine(
  plan: Pick<typeof plans.$inferSelect, "name" | "pricingModel" | "unitAmount" | "unitAmountDecimal">,
  quantity: number,
  amount: number,
  periodStart: string,
  periodEnd: string,
): InvoiceLineInput {
  return { ...subscriptionLine(plan, quantity, amount, periodStart, periodEnd), type: "usage", description: `${quantity} × ${plan.name} (usage)` };
}

// ---------------------------------------------------------------------------------------------
// The serializer

const bool = (column: string) => `json(CASE WHEN ${column} THEN 'true' ELSE 'false' END)`;

/**
 * The invoice columns that hold what it says about its parties, frozen at finalization: the buyer
 * (the user's name, email, address and tax ids) and the seller (the account's business name or
 * name, email, address, tax id and invoice footer). `json`: the column holds JSON, answered as such.
 */
export const ISSUED_PARTY_COLUMNS = [
  "customer_name",
  "customer_email",
  "customer_address",
  "customer_tax_ids",
  "account_name",
  "account_email",
  "account_address",
  "account_tax_ids",
  "footer",
] as const;
type IssuedPartyColumn = (typeof ISSUED_PARTY_COLUMNS)[number];
const JSON_PARTY_COLUMNS: ReadonlySet<IssuedPartyColumn> = new Set(["customer_address", "customer_tax_ids", "account_address", "account_tax_ids"]);

/**
 * The parties' current values, as SQL for each column of ISSUED_PARTY_COLUMNS: the user
 * `userId` of account `accountId` (the buyer), and the account (the seller). Read by the statement
 * that finalizes an invoice, which copies them, and by a draft's answer.
 */
export function issuedParties(userId: SQL, accountId: SQL): Record<IssuedPartyColumn, SQL> {
  const user = (expression: string) => sql`(SELECT ${sql.raw(expression)} FROM users WHERE users.id = ${userId} AND users.account_id = ${accountId})`;
  const account = (expression: string) => sql`(SELECT ${sql.raw(expression)} FROM accounts WHERE accounts.id = ${accountId})`;
  return {
    customer_name: user("users.name"),
    customer_email: user("users.email"),
    customer_address: user("users.address"),
    customer_tax_ids: sql`COALESCE(${user("users.tax_ids")}, '[]')`,
    account_name: account("COALESCE(accounts.business_name, accounts.name)"),
    account_email: account("accounts.email"),
    account_address: account("accounts.address"),
    account_tax_ids: sql`COALESCE(${account("CASE WHEN accounts.tax_id IS NULL THEN '[]' ELSE json_array(accounts.tax_id) END")}, '[]')`,
    footer: account("accounts.invoice_footer"),
  };
}

/** What a draft holds in a party column until it is finalized (its answer shows the live values). */
const unissued = (column: IssuedPartyColumn) => (column === "customer_tax_ids" || column === "account_tax_ids" ? sql`'[]'` : sql`NULL`);

/** issuedParties of the row of `invoices` a statement is on. */
const partiesOfRow = () => issuedParties(sql.raw("invoices.user_id"), sql.raw("invoices.account_id"));

/** The parties in an answer: a draft's live, a finalized invoice's as it was finalized. */
const partiesJson = (() => {
  const live = partiesOfRow();
  return sql.join(
    ISSUED_PARTY_COLUMNS.map((column) => {
      const value = sql`CASE WHEN invoices.status = 'draft' THEN ${live[column]} ELSE ${sql.raw(`invoices.${column}`)} END`;
      return sql`${sql.raw(`'${column}'`)}, ${JSON_PARTY_COLUMNS.has(column) ? sql`json(${value})` : value}`;
    }),
    sql.raw(", "),
  );
})();

/** The coupon whose discount the invoice carries, as it was named when the invoice was made. */
const COUPON_JSON = sql.raw("CASE WHEN invoices.coupon_id IS NULL THEN NULL ELSE json_object('id', invoices.coupon_id, 'name', invoices.coupon_name) END");

/**
 * The invoice as the API answers it, as SQL over a row of `invoices` (unaliased): the one
 * serializer of an invoice, for answers and event data alike.
 */
export const INVOICE_JSON = sql`json_object(
  'id', invoices.id, 'object', 'invoice', 'livemode', ${sql.raw(bool("invoices.livemode"))}, 'number', invoices.number, 'status', invoices.status,
  'subscription_id', invoices.subscription_id, 'user_id', invoices.user_id, ${partiesJson}, 'currency', invoices.currency,
  'period_start', invoices.period_start, 'period_end', invoices.period_end,
  'lines', (SELECT json_group_array(json(line)) FROM (
    SELECT json_object('id', l.id, 'type', l.type, 'description', l.description, 'quantity', l.quantity,
      'unit_amount_decimal', l.unit_amount_decimal, 'amount', l.amount, 'proration', ${sql.raw(bool("l.proration"))},
      'tax_amounts', json(l.tax_amounts), 'period_start', l.period_start, 'period_end', l.period_end) AS line
    FROM invoice_lines AS l WHERE l.invoice_id = invoices.id ORDER BY l.position)),
  'subtotal', invoices.subtotal, 'discount', invoices.discount, 'coupon', json(${COUPON_JSON}), 'tax', invoices.tax, 'total_tax_amounts', json(invoices.total_tax_amounts), 'total', invoices.total,
  'amount_paid', invoices.amount_paid, 'amount_due', invoices.amount_due, 'starting_balance', invoices.starting_balance, 'ending_balance', invoices.ending_balance, 'payment_id', invoices.payment_id,
  'hosted_invoice_url', CASE WHEN invoices.status IN ('open', 'paid') THEN invoices.hosted_invoice_url END,
  'test_clock', invoices.test_clock_id, 'created_at', invoices.created_at, 'finalized_at', invoices.finalized_at, 'paid_at', invoices.paid_at)`;

/**
 * The card of the payment that paid the invoice, `{ brand, last4 }` as JSON text (null unless it is
 * paid by a payment), as SQL over a row of `invoices`: what its PDF and hosted page say paid it.
 */
export const INVOICE_PAID_WITH = sql`(SELECT json_object('brand', p.card_brand, 'last4', p.card_last4) FROM payments AS p
  WHERE p.id = invoices.payment_id AND p.account_id = invoices.account_id AND invoices.status = 'paid')`;

/** The invoice as JSON, as the API answers it. */
export interface InvoiceJson {
  id: string;
  object: "invoice";
  livemode: boolean;
  number: string | null;
  status: InvoiceStatus;
  subscription_id: string | null;
  user_id: string | null;
  /** The buyer and the seller as the invoice names them (frozen at finalization; live on a draft). */
  customer_name: string | null;
  customer_email: string | null;
  customer_address: PostalAddress | null;
  customer_tax_ids: TaxIdValue[];
  /** The account's business_name, else its name. */
  account_name: string | null;
  account_email: string | null;
  account_address: PostalAddress | null;
  account_tax_ids: string[];
  /** The account's invoice_footer. */
  footer: string | null;
  currency: string;
  period_start: string;
  period_end: string;
  lines: {
    id: string;
    type: InvoiceLineType;
    description: string;
    quantity: number;
    unit_amount_decimal: string | null;
    amount: number;
    proration: boolean;
    /** Its tax per rate, rounded once when it was invoiced. */
    tax_amounts: TaxAmount[];
    period_start: string;
    period_end: string;
  }[];
  subtotal: number;
  discount: number;
  /** The coupon of the discount (null without one), named as it was when the invoice was made. */
  coupon: { id: string; name: string | null } | null;
  /** All the tax on it, inclusive and exclusive. */
  tax: number;
  /** Each rate's tax over the lines, with the rate's name and percentage as the invoice was issued. */
  total_tax_amounts: (TaxAmount & { display_name: string | null; percentage: string })[];
  /** subtotal − discount + exclusive tax. */
  total: number;
  amount_paid: number;
  amount_due: number;
  /** The user's balance before and after this invoice took from it (negative is a credit). */
  starting_balance: number;
  ending_balance: number;
  payment_id: string | null;
  /** The payer's page of the invoice, while it is open or paid (null without PUBLIC_URL). */
  hosted_invoice_url: string | null;
  /** The test clock its dates follow (its user's when it was made), or null. */
  test_clock: string | null;
  created_at: string;
  finalized_at: string | null;
  paid_at: string | null;
}

/**
 * How an event shows the invoice: `invoice.created` the draft it was (no number), and
 * `invoice.finalized` the open invoice before its payment, even when the same batch goes on to
 * pay it; later events the invoice as the batch committed it.
 */
type Stage = "draft" | "open" | "committed";

function invoiceDataSql(id: SQL, stage: Stage): SQL {
  const staged =
    stage === "draft"
      ? sql`json_set(${INVOICE_JSON}, '$.status', 'draft', '$.number', NULL, '$.finalized_at', NULL, '$.paid_at', NULL, '$.amount_paid', 0, '$.payment_id', NULL, '$.hosted_invoice_url', NULL)`
      : stage === "open"
        ? sql`json_set(${INVOICE_JSON}, '$.status', 'open', '$.paid_at', NULL, '$.amount_paid', 0, '$.payment_id', NULL, '$.hosted_invoice_url', invoices.hosted_invoice_url)`
        : INVOICE_JSON;
  return sql`(SELECT ${staged} FROM ${invoices} WHERE invoices.id = ${id})`;
}

/** The invoice at each stage, as a source of event data (read in the batch that emits the event). */
const INVOICE_SOURCES: Record<Stage, string> = {
  draft: eventDataSource("invoice:draft", (id) => invoiceDataSql(id, "draft")),
  open: eventDataSource("invoice:open", (id) => invoiceDataSql(id, "open")),
  committed: eventDataSource("invoice:committed", (id) => invoiceDataSql(id, "committed")),
};

const invoiceEvent = (db: Db, tenant: Tenant, id: string, type: InvoiceEventType, stage: Stage, at: number) =>
  emitEvent(db, tenant, { type, source: INVOICE_SOURCES[stage], objectId: id }, at);

type InvoiceEventType = "invoice.created" | "invoice.finalized" | "invoice.paid" | "invoice.payment_failed" | "invoice.payment_action_required" | "invoice.voided";

// ---------------------------------------------------------------------------------------------
// Writes

/** SQL: the account and mode's next invoice number, taken by the statement that finalizes one. */
const nextNumber = (tenant: Tenant) =>
  sql`(SELECT COALESCE(MAX(number_sequence), 0) + 1 FROM ${invoices} WHERE account_id = ${tenant.accountId} AND livemode = ${tenant.livemode ? 1 : 0})`;

/**
 * SQL: the invoice's tax per rate as it is issued, each with the rate's name and percentage then
 * (the name read from the rate in the batch that writes the invoice), so what the invoice, its PDF
 * and its page say never changes after, even when the rate is renamed.
 */
function issuedTaxAmounts(totals: InvoiceTotals, rates: readonly TaxRateValue[]): SQL {
  const amounts = totals.totalTaxAmounts.map((a) => ({ ...a, percentage: formatPercentage(rates.find((r) => r.id === a.tax_rate)?.percentage ?? 0) }));
  if (amounts.length === 0) return sql`'[]'`;
  return sql`(SELECT json_group_array(json(json_set(a.value, '$.display_name', (SELECT t.display_name FROM tax_rates AS t WHERE t.id = a.value ->> '$.tax_rate'))))
    FROM json_each(${JSON.stringify(amounts)}) AS a)`;
}

/** Lines per INSERT: 14 parameters each, within D1's 100 per statement. */
const LINES_PER_INSERT = 7;

/**
 * When an invoice is written: `at` its own time (billing time: a test clock's, else the wall
 * clock), `realNow` the wall clock (events, updated_at). A settlement whose caller does not know
 * the billing time passes `at: "clock"`: the statement reads the user's test clock itself.
 */
export interface InvoiceTimes {
  at: number;
  realNow: number;
}

/** Where a new invoice's hosted page lives: PUBLIC_URL (src/pages/public-url.ts), or null when unset. */
export interface InvoicePage {
  pageBase: string | null;
}

/** The hosted page of invoice `id` under `pageBase`, with a new unguessable secret. */
export const hostedInvoiceUrl = (pageBase: string | null, id: string): string | null =>
  pageBase === null ? null : `${pageBase}${HOSTED_INVOICE_PATH}/${id}/${newPageSecret()}`;

export interface InvoiceWrites {
  statements: Statement[];
  events: EmittedEvent[];
  totals: InvoiceTotals;
}

/**
 * A new invoice from its lines, written by the caller's batch: the invoice and its lines, its
 * number when it is finalized, its status after `outcome`, and its events (invoice.created, then
 * invoice.finalized, then invoice.paid or invoice.payment_failed, and invoice.voided for a void
 * one). Throws RangeError when the lines cannot make an invoice (another currency, beyond the
 * largest amount).
 */
export function issueInvoice(db: Db, input: InvoiceInput, outcome: InvoiceOutcome, { at, realNow, pageBase }: InvoiceTimes & InvoicePage): InvoiceWrites {
  const totals = totalsOf(input);
  const now = isoTime(at);
  const updated = isoTime(realNow);
  const { tenant } = input;
  const finalized = outcome.kind !== "draft";
  const status: InvoiceStatus = outcome.kind === "paid" ? "paid" : outcome.kind === "failed" ? outcome.status : outcome.kind;
  const paymentId = outcome.kind === "paid" || outcome.kind === "failed" ? outcome.paymentId : null;
  // A finalized invoice copies its parties in the statement that numbers it.
  const parties = issuedParties(sql`${input.userId}`, sql`${tenant.accountId}`);
  const couponId = totals.discount > 0 ? (input.couponId ?? null) : null;
  const insert = rawStatement(
    db,
    sql`INSERT INTO ${invoices} (id, account_id, livemode, number_sequence, status, subscription_id, period_index, user_id, currency,
        period_start, period_end, subtotal, discount, tax, exclusive_tax, total_tax_amounts, total, amount_paid, amount_due, starting_balance, ending_balance, payment_id, created_at, finalized_at, paid_at, voided_at, updated_at,
        hosted_invoice_url, coupon_id, coupon_name, test_clock_id, ${sql.raw(ISSUED_PARTY_COLUMNS.join(", "))})
      VALUES (${input.id}, ${tenant.accountId}, ${tenant.livemode ? 1 : 0}, ${finalized ? nextNumber(tenant) : sql`NULL`}, ${status},
        ${input.subscriptionId}, ${input.periodIndex}, ${input.userId}, ${totals.currency}, ${input.periodStart}, ${input.periodEnd},
        ${totals.subtotal}, ${totals.discount}, ${totals.tax}, ${totals.exclusiveTax}, ${issuedTaxAmounts(totals, input.taxRates ?? [])}, ${totals.total}, ${status === "paid" ? totals.amountDue : 0}, ${totals.amountDue}, ${input.balance?.starting ?? 0}, ${(input.balance?.starting ?? 0) + totals.creditApplied}, ${paymentId},
        ${now}, ${finalized ? now : null}, ${status === "paid" ? now : null}, ${status === "void" ? now : null}, ${updated},
        ${hostedInvoiceUrl(pageBase, input.id)}, ${couponId}, ${couponId === null ? null : sql`(SELECT name FROM coupons WHERE account_id = ${tenant.accountId} AND livemode = ${tenant.livemode ? 1 : 0} AND id = ${couponId})`},
        ${input.userId === null ? null : sql`(SELECT test_clock_id FROM users WHERE id = ${input.userId} AND account_id = ${tenant.accountId})`}, ${sql.join(ISSUED_PARTY_COLUMNS.map((column) => (finalized ? parties[column] : unissued(column))), sql.raw(", "))})`,
  );
  const rows = input.lines.map((line, position) => ({
    id: line.id ?? newId("invoiceLine", realNow),
    invoiceId: input.id,
    accountId: tenant.accountId,
    livemode: tenant.livemode,
    position,
    type: line.type,
    description: line.description,
    quantity: line.quantity,
    unitAmountDecimal: line.unitAmountDecimal,
    amount: line.amount,
    proration: line.proration,
    taxAmounts: totals.lineTaxes[position],
    periodStart: line.periodStart,
    periodEnd: line.periodEnd,
  }));
  const statements: Statement[] = [insert];
  for (let i = 0; i < rows.length; i += LINES_PER_INSERT) statements.push(db.insert(invoiceLines).values(rows.slice(i, i + LINES_PER_INSERT)));

  const events = [invoiceEvent(db, tenant, input.id, "invoice.created", "draft", realNow)];
  if (finalized) events.push(invoiceEvent(db, tenant, input.id, "invoice.finalized", "open", realNow));
  if (outcome.kind === "paid") events.push(invoiceEvent(db, tenant, input.id, "invoice.paid", "committed", realNow));
  if (outcome.kind === "failed") events.push(invoiceEvent(db, tenant, input.id, "invoice.payment_failed", "committed", realNow));
  if (status === "void") events.push(invoiceEvent(db, tenant, input.id, "invoice.voided", "committed", realNow));
  return { statements, events, totals };
}

/**
 * An existing invoice's charge attempt, in the batch that records the payment: paid by it (the
 * amount due is paid), or declined and left `open` or made `uncollectible`. The payment is
 * recorded whatever: money moved, so the update does not depend on the invoice's status.
 */
export function settleInvoice(
  db: Db,
  tenant: Tenant,
  invoiceId: string,
  outcome: Extract<InvoiceOutcome, { kind: "paid" | "failed" }>,
  { at, realNow }: { at: number | "clock"; realNow: number },
): { statements: Statement[]; events: EmittedEvent[] } {
  const updated = isoTime(realNow);
  const paidAt =
    at === "clock"
      ? sql`COALESCE((SELECT tc.frozen_time FROM test_clocks AS tc JOIN users AS u ON u.test_clock_id = tc.id WHERE u.id = invoices.user_id), ${updated})`
      : sql`${isoTime(at)}`;
  const update =
    outcome.kind === "paid"
      ? rawStatement(
          db,
          sql`UPDATE ${invoices} SET status = 'paid', amount_paid = amount_due, paid_at = ${paidAt}, payment_id = ${outcome.paymentId}, updated_at = ${updated}
            WHERE id = ${invoiceId}`,
        )
      : rawStatement(db, sql`UPDATE ${invoices} SET status = ${outcome.status}, payment_id = ${outcome.paymentId}, updated_at = ${updated} WHERE id = ${invoiceId}`);
  return {
    statements: [update],
    events: [invoiceEvent(db, tenant, invoiceId, outcome.kind === "paid" ? "invoice.paid" : "invoice.payment_failed", "committed", realNow)],
  };
}

/** Finalizes a draft: numbered (gap-free), its parties copied, and open, with invoice.finalized. For invoices issued as drafts. */
export function finalizeInvoice(db: Db, tenant: Tenant, invoiceId: string, { at, realNow }: InvoiceTimes): { statements: Statement[]; events: EmittedEvent[] } {
  const parties = partiesOfRow();
  return {
    statements: [
      rawStatement(
        db,
        sql`UPDATE ${invoices} SET status = 'open', number_sequence = ${nextNumber(tenant)}, finalized_at = ${isoTime(at)}, updated_at = ${isoTime(realNow)},
          ${sql.join(ISSUED_PARTY_COLUMNS.map((column) => sql`${sql.raw(column)} = ${parties[column]}`), sql.raw(", "))}
          WHERE id = ${invoiceId} AND status = 'draft'`,
      ),
    ],
    events: [invoiceEvent(db, tenant, invoiceId, "invoice.finalized", "committed", realNow)],
  };
}

/** The open invoices of a subscription, made uncollectible with their periods (a cancel: never collected). */
export const uncollectibleInvoicesOf = (db: Db, subscriptionId: string, at: number): Statement =>
  rawStatement(
    db,
    sql`UPDATE ${invoices} SET status = 'uncollectible', updated_at = ${isoTime(at)} WHERE subscription_id = ${subscriptionId} AND status = 'open'`,
  );

/**
 * invoice.payment_action_required for an open invoice whose off-session charge the card's bank
 * refused without its holder's authentication (3-D Secure): its payer can pay it on its hosted page.
 */
export const invoiceActionRequiredEvent = (db: Db, tenant: Tenant, invoiceId: string, at: number) =>
  invoiceEvent(db, tenant, invoiceId, "invoice.payment_action_required", "committed", at);

/** invoice.voided for an invoice the batch voids. */
export const invoiceVoidedEvent = (db: Db, tenant: Tenant, invoiceId: string, at: number) => invoiceEvent(db, tenant, invoiceId, "invoice.voided", "committed", at);
