// POST /processor-webhooks/stripe/{account_id}: Stripe's events for one Tender account (the
// connection's webhook_url). Public: Stripe signs each event, and the raw body is verified against
// the secrets of THAT account's connection (300-second tolerance), so an event signed for one
// account cannot change another's rows. A missing or bad signature, or an account without a
// connection, answers 400 and changes nothing. A verified event is applied once
// (src/payments/processor-settlements.ts) and acknowledged with 200; one about an object Tender
// does not know, or of a type Tender does not act on, is acknowledged too and changes nothing.
// An error while applying answers 500, so Stripe sends the event again; so does (503) an event
// whose account moved to another shard while it was being applied.
import { type OpenAPIHono, createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../../context";
import { hasPrefix } from "../../domain/ids";
import { clock } from "../../lib/clock";
import { accountMoving, invalidRequest } from "../../lib/errors";
import { readLimited } from "../../middleware/body";
import { alreadyRecorded, applySettlement } from "../../payments/processor-settlements";
import { processorFor } from "../../processor";
import { openSecrets, readConnection } from "../../processor/connections";
import { settlementOf, verifyStripeEvent } from "../../processor/stripe-events";
import { parsePayoutToken } from "../../processor/stripe-keys";
import { ERRORS, json } from "../openapi";
import { type Place, whereIs } from "../../accounts/move";
import { openShard } from "../../middleware/auth";

const PATH = "/processor-webhooks/stripe/{account_id}";

const ReceiptSchema = z
  .object({
    received: z.literal(true),
    event: z.string().openapi({ description: "Stripe's event id.", example: "evt_1Nv0FGQ9RKHgCVdK" }),
    outcome: z.enum(["applied", "unchanged", "ignored", "duplicate"]).openapi({
      description:
        "applied: it changed a Tender object; unchanged: the object was already so (or a later event decided it); ignored: not about a Tender object, or not a type Tender acts on; duplicate: this event was applied before.",
    }),
  })
  .openapi("ProcessorWebhookReceipt");

const route = createRoute({
  method: "post",
  path: PATH,
  tags: ["Processor"],
  operationId: "receiveStripeEvent",
  summary: "Receive Stripe's events (for Stripe)",
  description:
    "Where Stripe sends its events for this account: the webhook_url of PUT /api/processor. Not called by you: point your Stripe webhook endpoint, and a Connect endpoint for payouts, here. " +
    "Stripe-Signature is verified against the connection's webhook secrets with Stripe's 300-second tolerance; a missing or bad signature, or an account without a connection, answers 400 and changes nothing. " +
    "Each event is applied once, in any order: payout.paid / payout.failed settle live payouts, refund.updated settles live refunds (refund.completed, or the amount refundable again), charge.dispute.created emits payment.disputed. " +
    "Anything else, or an event about an object Tender does not know, answers 200 and changes nothing. " +
    "While the account is moving to another database, and for an event whose account moved while it was being applied, answers 503: Stripe sends it again.",
  security: [],
  request: {
    params: z.object({
      account_id: z.string().max(100).openapi({ param: { name: "account_id", in: "path" }, description: "The Tender account's id.", example: "acct_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    }),
    headers: z.object({ "stripe-signature": z.string().optional().openapi({ description: "Stripe's signature of the raw body: t=<timestamp>,v1=<HMAC-SHA256>." }) }),
    body: {
      required: true,
      description: "A Stripe event, exactly as Stripe sent it (its raw bytes are what is verified).",
      content: { "application/json": { schema: z.object({ id: z.string(), object: z.literal("event"), type: z.string() }).passthrough().openapi("StripeEvent") } },
    },
  },
  responses: {
    200: json(ReceiptSchema, "The event was verified and applied (or was not Tender's)."),
    400: ERRORS[400],
    413: ERRORS[413],
    500: ERRORS[500],
    503: ERRORS[503],
  },
});

/** Not a connected account, or a bad signature: the same 400 shape, with the reason as the code. */
const refused = (code: string, message: string) => invalidRequest(code, message);

/**
 * The shard the account lives on, and its connection there. The URL Stripe calls names the account,
 * not its shard (it must outlive a move), so every shard is asked, side by side, for the account's
 * row: the one that is home (not a copy being made, nor left behind by a move). While the account
 * is being moved, 503: Stripe sends the event again later, to wherever it lives then.
 */
async function connectionOnItsShard(c: Context<AppEnv>, accountId: string, now: number) {
  const places = await whereIs(c.env, accountId);
  const claimed = (p: Place) => p.moveUntil !== null && p.moveUntil > now;
  const home = places.find((p) => p.present && p.movedTo === null);
  // No home while a move's claim is live: between the two halves of its switch.
  if (!home && places.some(claimed)) throw accountMoving();
  if (!home) return undefined;
  if (claimed(home)) throw accountMoving();
  openShard(c, home.shard);
  const connection = await readConnection(c.var.db, accountId);
  return connection ? { shard: home.shard, connection } : undefined;
}

/**
 * After the event was applied (or found applied) on the shard it was read on: answered 200 only if
 * the account still lives there. A move that switched meanwhile (while the handler was at Stripe,
 * reversing a failed payout's transfer) has copied the shard before that write, and deletes what
 * the source holds: the effect is not where the account lives, so 503, and Stripe sends the event
 * again, to the new shard, where it is applied (any processor call again with the same reference).
 * A write before the switch is in the copy, or the switch refused it (its proof changed).
 */
async function stillLivesHere(c: Context<AppEnv>, accountId: string) {
  const row = await c.var.db.$client.prepare("SELECT moved_to FROM accounts WHERE id = ?").bind(accountId).first<{ moved_to: number | null }>();
  if (!row || row.moved_to !== null) {
    console.log(JSON.stringify({ message: "Stripe event applied on a shard the account left meanwhile: Stripe is asked to send it again", account: accountId }));
    throw accountMoving();
  }
}

async function receive(c: Context<AppEnv>) {
  const accountId = c.req.param("account_id") ?? "";
  // The raw bytes, exactly as sent: a re-serialized body would not verify.
  const rawBody = await readLimited(c.req.raw);
  const found = hasPrefix(accountId, "account") ? await connectionOnItsShard(c, accountId, clock.now()) : undefined;
  const connection = found?.connection;
  const { db } = c.var;
  if (!connection) {
    throw refused("no_processor_connection", "No account with a processor connection has this id. Nothing was changed.");
  }
  const secrets = await openSecrets(c.env, connection);
  const verified = await verifyStripeEvent({
    rawBody,
    signature: c.req.header("stripe-signature") ?? null,
    webhookSecret: [secrets.webhookSecret, ...(secrets.connectWebhookSecret ? [secrets.connectWebhookSecret] : [])],
    receivedAt: clock.now(),
  });
  if (!verified.verified) throw refused(verified.reason, `${verified.message} Nothing was changed.`);

  const tenant = { accountId: connection.accountId, livemode: true };
  const settlement = settlementOf(verified.event);
  const answer = (outcome: z.infer<typeof ReceiptSchema>["outcome"]) => c.json({ received: true as const, event: settlement.eventId, outcome }, 200);
  if (await alreadyRecorded(db, tenant, settlement.eventId)) {
    await stillLivesHere(c, tenant.accountId);
    return answer("duplicate");
  }
  const outcome = await applySettlement(
    {
      env: c.env,
      db,
      tenant,
      provider: "stripe",
      processor: () => processorFor(c.env, db, tenant),
      payoutAccountOf: (token) => {
        try {
          return parsePayoutToken(token).account;
        } catch {
          return null;
        }
      },
      now: clock.now(),
    },
    settlement,
  );
  await stillLivesHere(c, tenant.accountId);
  if (settlement.kind === "ignore") console.log(JSON.stringify({ message: "Stripe event ignored", event: settlement.eventId, type: settlement.type, reason: settlement.reason }));
  return answer(outcome);
}

export function registerStripeWebhooks(app: OpenAPIHono<AppEnv>) {
  // Documented from the route above; handled without its body validator, which would read the
  // body as JSON before the raw bytes are verified.
  app.openAPIRegistry.registerPath(route);
  app.post(PATH.replace("{account_id}", ":account_id"), receive);
}
