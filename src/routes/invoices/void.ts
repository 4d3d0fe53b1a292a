// POST /invoices/{id}/void: an open invoice will never be charged. An invoice of a subscription's
// billing period is the period being dunned: voiding it forgives that period, in the same batch,
// so no retry charges it (its period row becomes `void`) and the subscription is active again,
// billed from the next period on (as if the period had been paid, at no charge): a metered
// subscription's next period, already open, is invoiced at its own end.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq, sql } from "drizzle-orm";
import { invoiceVoidedEvent } from "../../billing/invoices";
import { chargeInFlight, periodDone, subscriptionUpdatedEvent } from "../../billing/periods";
import { balanceGivenBackOnVoid } from "../../billing/balance-credits";
import { guard, rawStatement, type Statement } from "../../db/batch";
import { invoices, plans, subscriptionPeriods, subscriptions } from "../../db/schema";
import type { AppEnv } from "../../context";
import { clock, isoTime } from "../../lib/clock";
import { conflict } from "../../lib/errors";
import { type EmittedEvent, emitEvent } from "../../webhooks/outbox";
import { apiRoute, json } from "../openapi";
import { readById } from "../reads";
import { commit } from "../write-path";
import { billingNowSql, chargeInProgress } from "../subscriptions/common";
import { invoiceAnswerSql, invoiceChanged, invoiceId, notOpen, tags } from "./common";
import { InvoiceSchema } from "./schema";

const voidInvoice = apiRoute({
  method: "post",
  path: "/invoices/{id}/void",
  tags,
  operationId: "voidInvoice",
  summary: "Void an open invoice",
  description:
    "An open invoice is voided: it will never be charged, and keeps its number. The invoice of a past-due subscription's period forgives that period: no dunning retry charges it, and the subscription is active again, billed from the next period on (subscription_updated; a subscription's final invoice, sent when it was set to cancel at its period's end, ends it instead: subscription_canceled): a licensed plan's next period is charged when it starts, a metered plan's (already open, taking usage) is invoiced when it ends. Only an open invoice can be voided (409 invoice_paid or invoice_not_open otherwise); while a charge of it is at the processor, 409 charge_in_progress. What the invoice took from the user's balance (ending_balance − starting_balance) is given back to it, once. An invoice with credit notes not void answers 409 invoice_has_credit_notes: void them first. Emits invoice.voided.",
  scope: "invoices:write",
  request: { params: invoiceId },
  responses: { 200: json(InvoiceSchema, "The voided invoice.") },
});

const INVOICE_CHANGED = "invoice_changed";

const CHARGE_IN_FLIGHT = "charge_in_flight";
const HAS_CREDIT_NOTES = "invoice_has_credit_notes";

export function registerVoidInvoice(app: OpenAPIHono<AppEnv>) {
  app.openapi(voidInvoice, async function voidInvoice(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const realNow = clock.now();
    const now = isoTime(realNow);
    // Read first: whether it bills a subscription's period decides what the batch changes.
    const invoice = await readById(c, invoices, id, "invoice");
    if (invoice.status !== "open") throw notOpen(id, invoice.status, "voided");

    const statements: Statement[] = [
      // Paid, or voided by another request, since it was read: refused.
      guard(db, INVOICE_CHANGED, sql`EXISTS (SELECT 1 FROM ${invoices} WHERE id = ${id} AND status = 'open')`),
      // The invoice of a change invoiced at once is open only while its charge is at the processor:
      // that charge settles it (paid, or void on a decline).
      guard(db, CHARGE_IN_FLIGHT, sql`NOT EXISTS (SELECT 1 FROM proration_charges WHERE invoice_id = ${id} AND status = 'claimed')`),
    ];
    // A note on it that credited the balance stands for a charge the void says will never be made:
    // void the notes first (each takes its credit back while the balance holds it).
    statements.push(guard(db, HAS_CREDIT_NOTES, sql`NOT EXISTS (SELECT 1 FROM credit_notes WHERE invoice_id = ${id} AND status = 'issued')`));
    const events: EmittedEvent[] = [];
    const { subscriptionId, periodIndex } = invoice;
    if (subscriptionId !== null && periodIndex !== null) {
      // The subscription's billing calendar and how its plan bills (in advance, or in arrears).
      const [billed] = await db
        .select({ sub: { billingAnchor: subscriptions.billingAnchor }, plan: { interval: plans.interval, usageType: plans.usageType }, final: subscriptionPeriods.final })
        .from(subscriptions)
        .innerJoin(plans, eq(plans.id, subscriptions.planId))
        .leftJoin(subscriptionPeriods, and(eq(subscriptionPeriods.subscriptionId, subscriptions.id), eq(subscriptionPeriods.periodIndex, periodIndex)))
        .where(eq(subscriptions.id, subscriptionId))
        .limit(1);
      // A final invoice forgiven: the subscription set to cancel at its period's end ends now.
      const final = billed.final === true;
      statements.push(
        // A charge of the period may be at the processor: it settles first.
        guard(db, CHARGE_IN_FLIGHT, sql`NOT ${chargeInFlight(subscriptionId)}`),
        db
          .update(subscriptionPeriods)
          .set({ status: "void", updatedAt: now })
          .where(and(eq(subscriptionPeriods.subscriptionId, subscriptionId), eq(subscriptionPeriods.periodIndex, periodIndex), eq(subscriptionPeriods.status, "open"))),
        // The period is forgiven: billing goes on from the next one, as when a period is paid (a
        // licensed period's successor is due when it starts, a metered one's when it ends).
        db
          .update(subscriptions)
          .set(
            final
              ? { status: "canceled", canceledAt: billingNowSql(subscriptions.userId, realNow), cancelAtPeriodEnd: false, dueAt: null, dunningAttempts: 0, updatedAt: now }
              : { status: "active", ...periodDone(billed.sub, billed.plan, periodIndex), dunningAttempts: 0, updatedAt: now },
          )
          .where(and(eq(subscriptions.id, subscriptionId), eq(subscriptions.status, "past_due"), eq(subscriptions.periodsBilled, periodIndex))),
      );
      events.push(
        final
          ? emitEvent(db, auth, { type: "subscription_canceled", subscriptionId, status: sql`(SELECT status FROM subscriptions WHERE id = ${subscriptionId})` }, realNow)
          : subscriptionUpdatedEvent(db, auth, subscriptionId, realNow),
      );
    }
    // What the invoice took from the user's balance is given back, once (Stripe: unapplied_from_invoice).
    statements.push(...balanceGivenBackOnVoid(db, id, realNow));
    statements.push(rawStatement(db, sql`UPDATE ${invoices} SET status = 'void', voided_at = ${now}, updated_at = ${now} WHERE id = ${id} AND status = 'open'`));
    events.unshift(invoiceVoidedEvent(db, auth, id, realNow));
    const { answered } = await commit(
      c,
      { statements, events, answer: db.select({ invoice: sql<string>`${invoiceAnswerSql(id)}` }).from(invoices).where(eq(invoices.id, id)) },
      200,
      invoiceAnswerSql(id),
      {
        failures: {
          [INVOICE_CHANGED]: invoiceChanged,
          [CHARGE_IN_FLIGHT]: chargeInProgress,
          [HAS_CREDIT_NOTES]: () =>
            conflict("invoice_has_credit_notes", `Invoice ${id} has credit notes that credited the customer's balance for it: void them first (POST /credit-notes/{id}/void), then the invoice.`),
        },
      },
    );
    const [row] = answered as { invoice: string }[];
    return c.json(JSON.parse(row.invoice), 200);
  });
}
