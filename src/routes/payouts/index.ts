// Payouts: create (pending, then settled on the job queue by src/payments/settle-payout.ts), list,
// read, and cancel while the payout has not been handed to the processor.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq, sql } from "drizzle-orm";
import { guard, guardExists } from "../../db/batch";
import { insertRow, preparedRaw } from "../../db/prepared";
import { payouts, users } from "../../db/schema";
import { callerPlaceholders, callerValues, keyAndConditionGuardSql, owned, ownedBy } from "../../db/scope";
import { PAYOUT_NEEDS_RECIPIENT, versionAtLeast } from "../../domain/api-versions";
import { hasPrefix, newId } from "../../domain/ids";
import { clock, isoDate, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { conflict, invalidRequest, notFound } from "../../lib/errors";
import { listSchema } from "../pagination";
import { found as present, listOwned, readById } from "../reads";
import { commit } from "../write-path";
import { readCard } from "../../payments/card-input";
import { readCurrency } from "../../payments/money-input";
import { type PayoutRow, payoutJsonSql, serializePayout } from "../../payments/serialize";
import { payoutSendClaimed, payoutSettlementMessages } from "../../payments/settle-payout";
import { sendSoon } from "../../lib/queue";
import { processorForRequest } from "../../processor";
import type { PayoutRecipient } from "../../processor/types";
import { emitEvent } from "../../webhooks/outbox";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { CreatePayoutBody, PayoutListQuery, PayoutSchema } from "./schema";

const tags = ["Payouts"];
const payoutId = idParam("payout", "po_01jd2x4k5m6n7p8q9r0s1t2v3w");

const create = apiRoute({
  method: "post",
  path: "/payout",
  tags,
  operationId: "createPayout",
  summary: "Initiate a payout",
  description:
    "Sends money to a card. The payout is created `pending` (emitting payout.created) and settles asynchronously: " +
    "`paid` or `failed` (payout.paid / payout.failed). Until it is sent it can be canceled. " +
    "The card number and CVV are passed to the processor and never stored; the answer shows only brand, last4 and expiry. " +
    "`recipient_id` is required (400 parameter_missing without it) since Tender-Version 2026-11-27; under earlier versions a test-mode payout may leave it out. " +
    "In live mode the payout goes through Stripe Connect: `recipient_id` is required and must be a user linked to a Stripe connected account (`stripe_account`), " +
    "and the card must be a debit card of that account for the currency (matched by last 4 and expiry; its number is not sent to Stripe). " +
    "Otherwise 400 recipient_not_payable, whose message says why. Money moves when the payout is sent (after its cancel window): a transfer to the connected account, then its payout to the card; " +
    "payout.paid or payout.failed follows Stripe's event (a payout can fail after it was paid, which Stripe reports days later: it then moves paid -> failed and the transfer is reversed).",
  scope: "payouts:write",
  request: jsonBodyOf(CreatePayoutBody),
  responses: { 201: json(PayoutSchema, "The new payout, pending.") },
});

const list = apiRoute({
  method: "get",
  path: "/payouts",
  tags,
  operationId: "listPayouts",
  summary: "List payouts",
  scope: "payouts:read",
  request: { query: PayoutListQuery },
  responses: { 200: json(listSchema(PayoutSchema, "PayoutList"), "A page of payouts, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/payouts/{id}",
  tags,
  operationId: "getPayout",
  summary: "Read a payout",
  scope: "payouts:read",
  request: { params: payoutId },
  responses: { 200: json(PayoutSchema, "The payout.") },
});

const cancel = apiRoute({
  method: "post",
  path: "/payouts/{id}/cancel",
  tags,
  operationId: "cancelPayout",
  summary: "Cancel a pending payout",
  description: "Cancels a payout that is still pending and not yet sent, and emits payout.canceled. Any other payout answers 409.",
  scope: "payouts:write",
  request: { params: payoutId },
  responses: { 200: json(PayoutSchema, "The canceled payout.") },
});

const RECIPIENT_MISSING = "recipient_missing";
const PAYOUT_MISSING = "payout_missing";
const PAYOUT_NOT_PENDING = "payout_not_pending";
const PAYOUT_BEING_SENT = "payout_being_sent";

/**
 * The first statement of a payout's batch when it names a recipient: the caller's key is live (as
 * credentialGuard checks, and refused first) and the recipient is a user of the caller's account
 * and mode, both when the batch runs, in one statement. Prepared once per isolate.
 */
const keyAndRecipientGuard = preparedRaw(() =>
  keyAndConditionGuardSql(
    RECIPIENT_MISSING,
    sql`EXISTS (SELECT 1 FROM ${users} WHERE ${and(ownedBy(users, callerPlaceholders), eq(users.id, sql.placeholder("recipientId")))})`,
  ),
);

export function registerPayouts(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createPayout(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const currency = readCurrency(body.currency);
    const card = await readCard(c.env, body, now);
    // Since 2026-11-27 a payout names who is paid in test mode as in live mode; earlier versions
    // keep the interface document's sample (a card, no recipient) working in test mode.
    if (body.recipient_id === undefined && versionAtLeast(c.var.apiVersion, PAYOUT_NEEDS_RECIPIENT)) {
      throw invalidRequest(
        "parameter_missing",
        `recipient_id: a payout needs the user being paid (required since Tender-Version ${PAYOUT_NEEDS_RECIPIENT}, in test mode as in live mode). Create the user with POST /api/users and send its id.`,
        "recipient_id",
      );
    }
    const recipientId = body.recipient_id ?? null;
    const recipientMissing = () => notFound("user", recipientId ?? "", "recipient_id");
    if (recipientId !== null && !hasPrefix(recipientId, "user")) throw recipientMissing();

    const processor = await processorForRequest(c);
    // In live mode the recipient's processor account decides where the money goes: read it (the
    // recipient is checked again in the batch). Test mode pays any card, with no read.
    let recipient: PayoutRecipient | null = recipientId === null ? null : { id: recipientId, processorAccount: null };
    if (recipientId !== null && auth.livemode) {
      const [user] = await db.select({ id: users.id, stripeAccount: users.stripeAccount }).from(users).where(owned(users, auth, eq(users.id, recipientId))).limit(1);
      const found = await present(c, user, "user", recipientId, "recipient_id");
      recipient = { id: found.id, processorAccount: found.stripeAccount };
    }
    // The processor says where the payout goes; the payout keeps its token, never the card.
    const destination = await processor.payoutDestination({ card: card.card, currency, recipient });
    if (!destination.payable) {
      throw invalidRequest("recipient_not_payable", destination.message, destination.reason === "no_matching_debit_card" ? "card_number" : "recipient_id");
    }
    const processorToken = destination.token;
    const row: PayoutRow = {
      id: newId("payout", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      recipientId,
      amount: body.amount,
      currency,
      description: body.description ?? null,
      status: "pending",
      failureCode: null,
      failureMessage: null,
      cardBrand: card.summary.brand,
      cardLast4: card.summary.last4,
      cardExpMonth: card.summary.exp_month,
      cardExpYear: card.summary.exp_year,
      cardFingerprint: card.fingerprint,
      processorToken,
      // Live mode: the connection's Stripe account, filled in at insert (migrations/0020's trigger);
      // Stripe's payout id once the settlement job has it.
      processorAccount: null,
      processorObject: null,
      date: isoDate(now),
      createdAt: isoTime(now),
      updatedAt: isoTime(now),
    };
    const payout = serializePayout(row);
    // The recipient is checked inside the batch, with the caller's key: no extra round trip, no
    // gap to race, and no statement of its own.
    await commit(
      c,
      { statements: [insertRow(db, payouts, row)], events: [emitEvent(db, auth, { type: "payout.created", data: payout }, now)] },
      201,
      payout,
      {
        failures: { [RECIPIENT_MISSING]: recipientMissing },
        ...(recipientId !== null ? { keyGuard: keyAndRecipientGuard(db).with({ ...callerValues(auth), recipientId }) } : {}),
      },
    );
    // After the answer, with other requests' (src/lib/queue.ts). A lost enqueue is not lost work:
    // the cron sweep re-enqueues stale payouts.
    sendSoon(c.env.JOB_QUEUE, payoutSettlementMessages([row.id]), (p) => c.executionCtx.waitUntil(p), (error) => {
      console.error(JSON.stringify({ message: "payout settlement enqueue failed; the sweep will retry", payout: row.id, error: String(error) }));
    });
    return c.json(payout, 201);
  });

  app.openapi(list, async function listPayouts(c) {
    const query = c.req.valid("query");
    const page = await listOwned(c, {
      table: payouts,
      query,
      filters: [
        [payouts.recipientId, query.recipient_id],
        [payouts.status, query.status],
      ],
      validCursor: (id) => hasPrefix(id, "payout"),
      serialize: serializePayout,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getPayout(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, payouts, id, "payout");
    return c.json(serializePayout(row), 200);
  });

  app.openapi(cancel, async function cancelPayout(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const now = clock.now();
    const mine = and(ownedBy(payouts, auth), eq(payouts.id, id));
    let returned: unknown[];
    let notPending = false;
    try {
      ({ returned } = await commit(
        c,
        {
          statements: [
            guardExists(db, PAYOUT_MISSING, payouts, mine),
            guard(db, PAYOUT_NOT_PENDING, sql`EXISTS (SELECT 1 FROM ${payouts} WHERE ${mine} AND ${payouts.status} = 'pending')`),
            // Once handed to the processor, the money may already be moving.
            guard(db, PAYOUT_BEING_SENT, sql`NOT ${payoutSendClaimed(id)}`),
          ],
          returning: db
            .update(payouts)
            .set({ status: "canceled", updatedAt: isoTime(now) })
            .where(and(mine, eq(payouts.status, "pending")))
            .returning(),
          events: [emitEvent(db, auth, { type: "payout.canceled", dataSql: payoutJsonSql(id), objectId: id }, now)],
        },
        200,
        payoutJsonSql(id),
        {
          failures: {
            [PAYOUT_MISSING]: () => notFound("payout", id, "id"),
            [PAYOUT_NOT_PENDING]: () => {
              notPending = true;
              return conflict(PAYOUT_NOT_PENDING, `Payout '${id}' is no longer pending; only a pending payout can be canceled.`);
            },
            [PAYOUT_BEING_SENT]: () =>
              conflict(PAYOUT_NOT_PENDING, `Payout '${id}' is already being sent to the card and can no longer be canceled.`),
          },
        },
      ));
    } catch (error) {
      if (notPending) {
        // Name the state it is in; this read happens only on the error path.
        const current = await db.query.payouts.findFirst({ columns: { status: true }, where: mine });
        throw conflict(PAYOUT_NOT_PENDING, `Payout '${id}' is ${current?.status ?? "no longer pending"}; only a pending payout can be canceled.`);
      }
      throw error;
    }
    const [updated] = returned as PayoutRow[];
    return c.json(serializePayout(updated), 200);
  });
}
