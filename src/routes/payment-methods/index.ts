// A user's saved cards: POST saves one (from a processor token, or the card fields), GET lists and
// reads them, DELETE detaches one. The processor is called before the batch (attaching or vaulting
// moves no money, but may run twice: its reference is fixed per use of the Idempotency-Key), and
// the row and its event are one batch.
import type { Context } from "hono";
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { and, eq, isNull, sql } from "drizzle-orm";
import type { AppEnv } from "../../context";
import { guard, guardExists } from "../../db/batch";
import { paymentMethods, users } from "../../db/schema";
import { owned } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { cardFingerprintSecret } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import { authenticationRequiredToSave, cardDeclined, conflict, invalidRequest, notFound } from "../../lib/errors";
import { idempotencyClaimLost } from "../../middleware/idempotency";
import { rowAnswer } from "../../middleware/stored-answers";
import { cardInBody, readCard } from "../../payments/card-input";
import { withProcessorRetries } from "../../payments/charge";
import { paymentMethodCharging, paymentMethodInUse, tokenizedCardFingerprint } from "../../payments/methods";
import { processorForCardFields, processorForRequest, processorOf } from "../../processor";
import type { SavedCardDetails } from "../../processor/types";
import { emitEvent } from "../../webhooks/outbox";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { listQuery, listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { commit, commitAndAnswerRow, commitAndRespond, outcomeTracked } from "../write-path";
import { UserSchema, serializeUser, userJsonSql } from "../users/schema";
import { CreatePaymentMethodBody, PaymentMethodSchema, paymentMethodJsonSql, serializePaymentMethod } from "./schema";

const tags = ["Payment methods"];

const userParam = z.string({ error: "id must be the user's id, of at most 100 characters." }).max(100).openapi({ param: { name: "id", in: "path" }, description: "The user's id.", example: "usr_01jd2x4k5m6n7p8q9r0s1t2v3w" });
const userParams = z.object({ id: userParam });
const methodParams = z.object({
  id: userParam,
  pm_id: z
    .string({ error: "pm_id must be the payment method's id, of at most 100 characters." })
    .max(100)
    .openapi({ param: { name: "pm_id", in: "path" }, description: "The payment method's id.", example: "pmt_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
});

const create = apiRoute({
  method: "post",
  path: "/api/users/{id}/payment-methods",
  claimFirst: true,
  tags,
  operationId: "createPaymentMethod",
  summary: "Save a card for a user",
  description:
    "Saves a card as the user's payment method (pmt_…), to charge later with payment_method: \"pmt_…\" (subscriptions) instead of the card fields, and emits payment_method.attached. " +
    "Send processor_token, the card as the processor tokenized it: in live mode a Stripe PaymentMethod (pm_…) made by Stripe.js with the connection's publishable key, which is attached to the user's Stripe Customer and set up for off-session charges with a SetupIntent (a card whose bank asks its holder to authenticate on setup answers 402 authentication_required, with setup_intent { id, client_secret } for Stripe.js handleNextAction: nothing is saved), or a SetupIntent (seti_…) of the user's Customer that succeeded; in test mode Stripe's test PaymentMethod names (pm_card_visa, pm_card_chargeDeclined, …), each behaving as its test card. A token the processor does not know answers 400 processor_token_invalid. " +
    "Or send the card fields (checked as everywhere, the CVV never stored): in live mode only on a connection made with raw_card_data true, else 400 raw_card_data_unavailable. A card its bank refuses answers 402. Moves no money.",
  scope: "payment_methods:write",
  request: { params: userParams, ...jsonBodyOf(CreatePaymentMethodBody) },
  responses: { 201: json(PaymentMethodSchema, "The saved card.") },
  extraErrors: [402],
});

const list = apiRoute({
  method: "get",
  path: "/api/users/{id}/payment-methods",
  tags,
  operationId: "listPaymentMethods",
  summary: "List a user's saved cards",
  description: "The user's attached payment methods, newest first (detached ones are left out).",
  scope: "payment_methods:read",
  request: { params: userParams, query: listQuery },
  responses: { 200: json(listSchema(PaymentMethodSchema, "PaymentMethodList"), "A page of the user's payment methods, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/api/users/{id}/payment-methods/{pm_id}",
  tags,
  operationId: "getPaymentMethod",
  summary: "Read a saved card",
  description: "A payment method of the user, attached or detached.",
  scope: "payment_methods:read",
  request: { params: methodParams },
  responses: { 200: json(PaymentMethodSchema, "The payment method.") },
});

const detach = apiRoute({
  method: "delete",
  path: "/api/users/{id}/payment-methods/{pm_id}",
  tags,
  operationId: "detachPaymentMethod",
  summary: "Detach a saved card",
  description:
    "Detaches the payment method: it can be charged no more and leaves the user's list (in live mode the PaymentMethod is detached from the user's Stripe Customer too), and emits payment_method.detached. While a subscription that is not canceled charges it, or a POST /subscriptions is charging it for a new one, answers 409 payment_method_in_use: give the subscription another card first (PUT /subscriptions/{id}). Detaching a detached one answers it again.",
  scope: "payment_methods:write",
  request: { params: methodParams },
  responses: { 200: json(PaymentMethodSchema, "The detached payment method.") },
  extraErrors: [409],
});

const setDefault = apiRoute({
  method: "post",
  path: "/api/users/{id}/payment-methods/{pm_id}/default",
  tags,
  operationId: "setDefaultPaymentMethod",
  summary: "Make a saved card the user's default",
  description:
    "Makes the user's attached payment method their default (default_payment_method on the user, as Stripe's invoice_settings.default_payment_method) and emits customer.updated. It changes no subscription: each charges the card it was given (PUT /subscriptions/{id} with payment_method moves one; the customer portal does both). Detaching the default card clears default_payment_method. Another user's card answers 404; a detached one 400 payment_method_detached.",
  scope: "payment_methods:write",
  request: { params: methodParams },
  responses: { 200: json(UserSchema, "The user, with its default_payment_method.") },
});

const USER_MISSING = "user_missing";
const METHOD_MISSING = "payment_method_missing";

const ATTACHED_TWICE = "unique:payment_methods.account_id, payment_methods.livemode, payment_methods.attach_reference";
const IN_USE = "payment_method_in_use";
const METHOD_DETACHED = "payment_method_detached";

/** A detach's answer, stored as the row the batch committed (the token and fingerprint left out). */
const detachedAnswer = rowAnswer("payment_method", paymentMethods, serializePaymentMethod, ["processorToken", "cardFingerprint", "attachReference"]);

const inUse = (id: string) =>
  conflict(IN_USE, `Payment method ${id} is charged by a subscription that is not canceled: give that subscription another card (PUT /subscriptions/{id} with payment_method or card fields), or cancel it, first.`);

/**
 * The processor reference of saving a card: fixed for one use of the request's Idempotency-Key,
 * so a retry attaches (or vaults) once at the processor; else the new payment method's id.
 */
function attachReference(c: Context<AppEnv>, id: string): string {
  const claim = c.var.idempotency;
  const { accountId, livemode } = c.var.auth;
  return claim ? `${accountId}${livemode ? ":live" : ""}:idempotency:${claim.key}:${claim.since}:payment_method` : id;
}

export function registerPaymentMethods(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createPaymentMethod(c) {
    const { db, auth } = c.var;
    const { id: userId } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = clock.now();
    const { processor_token: token, ...cardFields } = body;
    const card = cardInBody(cardFields);
    // Each field's own refusal first (a card field the card check refuses), then their combination.
    const checked = card ? await readCard(c.env, card, now) : null;
    if (token !== undefined && card) {
      throw invalidRequest("parameter_unexpected", "card_number: send processor_token or the card fields, not both.", "card_number");
    }
    if (token === undefined && !card) {
      throw invalidRequest("parameter_missing", "processor_token: send the card as the processor tokenized it (processor_token), or the card fields.", "processor_token");
    }
    const user = await readById(c, users, userId, "user");
    const customer = { id: user.id, email: user.email };
    const id = newId("paymentMethod", now);
    const reference = attachReference(c, id);

    let saved: { token: string; card: SavedCardDetails; fingerprint: string };
    if (checked) {
      const processor = await processorForCardFields(c);
      // A processor that threw may have vaulted the card: the key stays claimed, and its retry vaults the same reference.
      const vaulted = await outcomeTracked(c, () => withProcessorRetries(() => processor.vaultCard({ card: checked.card, customer, reference, firstAttemptAt: c.var.idempotency ? Date.parse(c.var.idempotency.since) : now })));
      if (vaulted.outcome.status === "failed") throw cardDeclined(vaulted.outcome.code, vaulted.outcome.message);
      if (!vaulted.token) throw new Error(`the processor vaulted payment method ${id} without a token`);
      const { brand, last4, exp_month, exp_year } = checked.summary;
      saved = { token: vaulted.token, card: { brand, last4, expMonth: exp_month, expYear: exp_year, fingerprintSource: "" }, fingerprint: checked.fingerprint };
    } else {
      const processor = await processorForRequest(c);
      // A call whose answer was lost is made again with the same reference: the processor answers it as the first.
      // Set up for off-session charges (a Stripe SetupIntent) unless the caller charges it at once.
      const setup = auth.chargesSavedCardNow !== true;
      const attached = await outcomeTracked(c, () => withProcessorRetries(() => processor.attachPaymentMethod({ processorToken: token as string, customer, reference, setup, checkoutSession: auth.setupForCheckoutSession })));
      if (attached.status === "invalid") throw invalidRequest("processor_token_invalid", `processor_token names no card the processor can save for this user. ${attached.message}`, "processor_token");
      if (attached.status === "failed") throw cardDeclined(attached.code, attached.message);
      if (attached.status === "requires_action") throw authenticationRequiredToSave(attached.reference, attached.clientSecret);
      saved = { token: attached.token, card: attached.card, fingerprint: await tokenizedCardFingerprint(attached.card.fingerprintSource, cardFingerprintSecret(c.env)) };
    }

    const row: typeof paymentMethods.$inferInsert & { detachedAt: null } = {
      id,
      accountId: auth.accountId,
      livemode: auth.livemode,
      userId: user.id,
      type: "card",
      cardBrand: saved.card.brand,
      cardLast4: saved.card.last4,
      cardExpMonth: saved.card.expMonth,
      cardExpYear: saved.card.expYear,
      cardFingerprint: saved.fingerprint,
      processorToken: saved.token,
      attachReference: reference,
      createdAt: isoTime(now),
      detachedAt: null,
    };
    const answer = serializePaymentMethod(row as typeof paymentMethods.$inferSelect);
    return commitAndRespond(
      c,
      {
        statements: [db.insert(paymentMethods).values(row)],
        events: [emitEvent(db, auth, { type: "payment_method.attached", data: answer, objectId: id }, now)],
      },
      201,
      answer,
      // Another request that took this Idempotency-Key over saved the card under the same reference.
      { failures: { [ATTACHED_TWICE]: idempotencyClaimLost } },
    );
  });

  app.openapi(list, async function listPaymentMethods(c) {
    const { id: userId } = c.req.valid("param");
    await readById(c, users, userId, "user");
    const page = await listOwned(c, {
      table: paymentMethods,
      query: c.req.valid("query"),
      filters: [
        [paymentMethods.userId, userId],
        [paymentMethods.detachedAt, null],
      ],
      validCursor: (id) => hasPrefix(id, "paymentMethod"),
      serialize: serializePaymentMethod,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getPaymentMethod(c) {
    const { id: userId, pm_id: id } = c.req.valid("param");
    const row = await readById(c, paymentMethods, id, "payment_method", "pm_id");
    if (row.userId !== userId) throw notFound("payment_method", id, "pm_id");
    return c.json(serializePaymentMethod(row), 200);
  });

  app.openapi(setDefault, async function setDefaultPaymentMethod(c) {
    const { db, auth } = c.var;
    const { id: userId, pm_id: id } = c.req.valid("param");
    const now = clock.now();
    const missingUser = () => notFound("user", userId, "id");
    const missingMethod = () => notFound("payment_method", id, "pm_id");
    if (!hasPrefix(userId, "user")) throw missingUser();
    if (!hasPrefix(id, "paymentMethod")) throw missingMethod();
    const user = owned(users, auth, eq(users.id, userId));
    const method = owned(paymentMethods, auth, eq(paymentMethods.id, id), eq(paymentMethods.userId, userId));
    // One batch: the user and their card exist and the card is attached when the default is written.
    const { returned } = await commit(
      c,
      {
        statements: [
          guardExists(db, USER_MISSING, users, user),
          guardExists(db, METHOD_MISSING, paymentMethods, method),
          guardExists(db, METHOD_DETACHED, paymentMethods, and(method, isNull(paymentMethods.detachedAt))),
        ],
        returning: db.update(users).set({ defaultPaymentMethodId: id, updatedAt: isoTime(now) }).where(user).returning(),
        events: [emitEvent(db, auth, { type: "customer.updated", dataSql: userJsonSql(userId), objectId: userId }, now)],
      },
      200,
      userJsonSql(userId),
      {
        failures: {
          [USER_MISSING]: missingUser,
          [METHOD_MISSING]: missingMethod,
          [METHOD_DETACHED]: () => invalidRequest("payment_method_detached", `Payment method ${id} was detached and can be the default no more: save the card again.`, "pm_id"),
        },
      },
    );
    const [updated] = returned as (typeof users.$inferSelect)[];
    return c.json(serializeUser(updated), 200);
  });

  app.openapi(detach, async function detachPaymentMethod(c) {
    const { db, auth } = c.var;
    const { id: userId, pm_id: id } = c.req.valid("param");
    const now = clock.now();
    const row = await readById(c, paymentMethods, id, "payment_method", "pm_id");
    if (row.userId !== userId) throw notFound("payment_method", id, "pm_id");
    const mine = owned(paymentMethods, auth, eq(paymentMethods.id, id), eq(paymentMethods.userId, userId));
    let answered;
    if (row.detachedAt !== null) {
      answered = c.json(serializePaymentMethod(row), 200);
    } else {
      answered = await commitAndAnswerRow(
        c,
        {
          statements: [
            guard(db, METHOD_DETACHED, sql`EXISTS (SELECT 1 FROM ${paymentMethods} WHERE ${and(mine, isNull(paymentMethods.detachedAt))})`),
            // A subscription committed since the read above (or still charging it) keeps it attached.
            guard(db, IN_USE, sql`NOT ${paymentMethodInUse(id)} AND NOT ${paymentMethodCharging(id, now)}`),
            // Detaching the user's default card leaves them with no default (as Stripe does).
            db
              .update(users)
              .set({ defaultPaymentMethodId: null, updatedAt: isoTime(now) })
              .where(owned(users, auth, eq(users.id, userId), eq(users.defaultPaymentMethodId, id))),
          ],
          returning: db
            .update(paymentMethods)
            .set({ detachedAt: isoTime(now) })
            .where(and(mine, isNull(paymentMethods.detachedAt)))
            .returning(),
          events: [emitEvent(db, auth, { type: "payment_method.detached", dataSql: paymentMethodJsonSql(id), objectId: id }, now)],
        },
        detachedAnswer,
        eq(paymentMethods.id, id),
        { failures: { [METHOD_DETACHED]: () => conflict("payment_method_changed", `Payment method ${id} was detached by another request meanwhile; read it.`), [IN_USE]: () => inUse(id) } },
      );
    }
    // Tender no longer charges it whatever the processor answers; the processor's copy is taken
    // off the customer after the commit (idempotent: a repeated DELETE asks again).
    await detachAtProcessor(c, row.processorToken, id);
    return answered;
  });
}

async function detachAtProcessor(c: Context<AppEnv>, token: string, id: string): Promise<void> {
  try {
    const processor = await processorOf(c.env, c.var.db, c.var.auth);
    if (!processor) throw new Error("no processor connection");
    await processor.detachPaymentMethod({ token, reference: id });
  } catch (error) {
    // Never the token or a key: the payment method's id and the error's name and message.
    console.error(JSON.stringify({ request_id: c.var.requestId, message: "payment method detached in Tender; the processor's detach failed (DELETE again to retry it)", payment_method: id, error: error instanceof Error ? `${error.name}: ${error.message}` : "unknown" }));
  }
}
