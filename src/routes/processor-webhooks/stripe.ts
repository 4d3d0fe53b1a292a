// POST /processor-webhooks/stripe/{account_id}: Stripe's events for one Tender account (the
// connection's webhook_url). Public: Stripe signs each event, and the raw body is verified against
// the secrets of THAT account's connections (300-second tolerance): the live one and the retired
// ones (a connection removed or replaced by another Stripe account's keeps verifying the events
// about what was made through it), so an event signed for one account cannot change another's
// rows. A request whose Stripe-Signature header cannot verify (missing, malformed, too old) is
// refused before its body is read or any database asked; a body over STRIPE_EVENT_MAX_BYTES
// answers 413. A bad signature, or an account that never had a connection, answers 400 and
// changes nothing. A verified event is applied once (src/payments/processor-settlements.ts, which
// also checks that it comes from where the object was made) and acknowledged with 200; one about
// an object Tender does not know, or of a type Tender does not act on, is acknowledged too and
// changes nothing. An error while applying answers 500, so Stripe sends the event again; so does
// (503) an event whose account moved to another shard while it was being applied.
import { type OpenAPIHono, createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../../context";
import { hasPrefix } from "../../domain/ids";
import { clock } from "../../lib/clock";
import { accountMoving, invalidRequest } from "../../lib/errors";
import { readLimited } from "../../middleware/body";
import { SETTLED_ON_A_SHARD_LEFT, alreadyRecorded, applySettlement } from "../../payments/processor-settlements";
import { failureReason } from "../../db/batch";
import { type EventConnection, eventConnections, openSecrets } from "../../processor/connections";
import { processorThrough } from "../../processor";
import { type VerifiedEvent, settlementOf, signatureHeaderProblem, verifyStripeEvent } from "../../processor/stripe-events";
import { parsePayoutToken } from "../../processor/stripe-keys";
import { ERRORS, json } from "../openapi";
import { type Place, whereIs } from "../../accounts/move";
import { openShard } from "../../middleware/auth";
import { settleSetupIntentEvent } from "../../pages/checkout";

const PATH = "/processor-webhooks/stripe/{account_id}";

/**
 * The largest Stripe event read. An event embeds one API object, whose lists Stripe cuts to 10
 * items and whose metadata holds at most 50 keys of 500 characters: the events Tender acts on
 * (payouts, refunds, disputes) are a few KiB. A quarter of the API's 1 MiB leaves a wide margin.
 */
export const STRIPE_EVENT_MAX_BYTES = 256 * 1024;

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
    "Stripe-Signature is verified against the connection's webhook secrets, and those of connections it replaced or that were removed (kept for this only), with Stripe's 300-second tolerance; a missing or bad signature, or an account that never had a connection, answers 400 and changes nothing. A body over 256 KiB answers 413. " +
    "Each event is applied once, in any order: payout.paid / payout.failed settle live payouts, refund.updated settles live refunds (refund.completed, or the amount refundable again), charge.dispute.created emits payment.disputed, payment_intent.succeeded / amount_capturable_updated / payment_failed / canceled record how a payment's 3-D Secure ended (once, whichever of the event and the payer's return comes first); setup_intent.succeeded saves the card of a live setup checkout session whose payer authenticated and completes it (once, whichever of the event and the payer's return comes first). " +
    "An event settles an object only if it comes from the Stripe account (and connected account) the object was made through, in that key's mode, naming the Stripe id Tender recorded; one that does not is answered 200 ignored and not recorded, so the same event from there still applies. " +
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
 * The shard the account lives on, and its connections there (live, then retired). The URL Stripe
 * calls names the account, not its shard (it must outlive a move), so every shard is asked, side
 * by side, for the account's row: the one that is home (not a copy being made, nor left behind by
 * a move). While the account is being moved, 503: Stripe sends the event again later, to wherever
 * it lives then.
 */
async function connectionsOnItsShard(c: Context<AppEnv>, accountId: string, now: number) {
  const places = await whereIs(c.env, accountId);
  const claimed = (p: Place) => p.moveUntil !== null && p.moveUntil > now;
  const home = places.find((p) => p.present && p.movedTo === null);
  // No home while a move's claim is live: between the two halves of its switch.
  if (!home && places.some(claimed)) throw accountMoving();
  if (!home) return undefined;
  if (claimed(home)) throw accountMoving();
  openShard(c, home.shard);
  const connections = await eventConnections(c.var.db, accountId);
  return connections.length > 0 ? { shard: home.shard, connections } : undefined;
}

const isLiveKey = (secretKey: string) => /^(sk|rk)_live_/.test(secretKey);

/**
 * The event, verified against the secrets of one of the account's connections (the live one
 * first), and that connection: an event verifies against at most one in practice, since each
 * Stripe endpoint has its own secret. Otherwise the most telling refusal.
 */
async function verifiedAgainst(c: Context<AppEnv>, connections: EventConnection[], rawBody: string, signature: string, receivedAt: number) {
  let refusal: Extract<VerifiedEvent, { verified: false }> | null = null;
  let unopened = 0;
  for (const connection of connections) {
    let secrets: Awaited<ReturnType<typeof openSecrets>>;
    try {
      secrets = await openSecrets(c.env, connection.row);
    } catch (error) {
      // A connection (live or retired) sealed under a key the ring no longer holds: the others are
      // still tried, so that a late event about what a retired one made is settled all the same.
      console.error(JSON.stringify({ request_id: c.var.requestId, message: `${connection.retired ? "retired" : "live"} processor connection cannot be opened`, processor_account: connection.processorAccount, error: String(error) }));
      unopened++;
      continue;
    }
    const verified = await verifyStripeEvent({
      rawBody,
      signature,
      webhookSecret: [secrets.webhookSecret, ...(secrets.connectWebhookSecret ? [secrets.connectWebhookSecret] : [])],
      receivedAt,
    });
    if (verified.verified) return { event: verified.event, connection, livemode: isLiveKey(secrets.secretKey) };
    if (refusal === null || refusal.reason === "signature_mismatch") refusal = verified;
  }
  // Perhaps signed with a secret that cannot be opened now: a 500, so that Stripe sends it again.
  if (unopened > 0) throw new Error(`${unopened} processor connection(s) of the account cannot be opened, and no other verified the event`);
  throw refused(refusal?.reason ?? "signature_mismatch", `${refusal?.message ?? "No signature matches the body and the webhook secret."} Nothing was changed.`);
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
  const signature = c.req.header("stripe-signature") ?? null;
  // What no secret can verify is refused before the body is read or any shard is asked.
  const unverifiable = signatureHeaderProblem(signature, clock.now());
  if (unverifiable) throw refused(unverifiable.reason, `${unverifiable.message} Nothing was changed.`);
  // The raw bytes, exactly as sent: a re-serialized body would not verify.
  const rawBody = await readLimited(c.req.raw, STRIPE_EVENT_MAX_BYTES);
  const found = hasPrefix(accountId, "account") ? await connectionsOnItsShard(c, accountId, clock.now()) : undefined;
  if (!found) {
    throw refused("no_processor_connection", "No account with a processor connection has this id. Nothing was changed.");
  }
  const { db } = c.var;
  const verified = await verifiedAgainst(c, found.connections, rawBody, signature!, clock.now());

  const tenant = { accountId, livemode: true };
  const settlement = settlementOf(verified.event);
  const answer = (outcome: z.infer<typeof ReceiptSchema>["outcome"]) => c.json({ received: true as const, event: settlement.eventId, outcome }, 200);
  if (await alreadyRecorded(db, tenant, settlement.eventId)) {
    await stillLivesHere(c, tenant.accountId);
    return answer("duplicate");
  }
  // A setup checkout session's SetupIntent: saved and completed as the page's return does (once, whichever comes first).
  if (settlement.kind === "setup_intent") {
    if (settlement.account !== null || !settlement.livemode || !verified.livemode) return answer("ignored");
    const settled = await settleSetupIntentEvent(appOf(c), c, accountId, settlement);
    await stillLivesHere(c, tenant.accountId);
    return answer(settled);
  }
  // A batch refused because the account moved meanwhile (SETTLED_ON_A_SHARD_LEFT) answers 503 below.
  const outcome = await applySettlement(
    {
      env: c.env,
      db,
      tenant,
      provider: "stripe",
      source: { processorAccount: verified.connection.processorAccount, livemode: verified.livemode },
      processorThrough: (processorAccount) => processorThrough(c.env, db, accountId, processorAccount),
      payoutAccountOf: (token) => {
        try {
          return parsePayoutToken(token).account;
        } catch {
          return null;
        }
      },
      payoutCardOf: (token) => {
        try {
          return parsePayoutToken(token).card;
        } catch {
          return null;
        }
      },
      now: clock.now(),
    },
    settlement,
  ).catch(async (error) => {
    if (failureReason(error) === SETTLED_ON_A_SHARD_LEFT) await stillLivesHere(c, tenant.accountId);
    throw error;
  });
  await stillLivesHere(c, tenant.accountId);
  if (settlement.kind === "ignore") console.log(JSON.stringify({ message: "Stripe event ignored", event: settlement.eventId, type: settlement.type, reason: settlement.reason }));
  return answer(outcome);
}

const APP: unique symbol = Symbol("tender.stripeWebhooksApp");
const appOf = (c: Context<AppEnv>) => (c as unknown as { [APP]: Parameters<typeof settleSetupIntentEvent>[0] })[APP];

export function registerStripeWebhooks(app: OpenAPIHono<AppEnv>) {
  // Documented from the route above; handled without its body validator, which would read the
  // body as JSON before the raw bytes are verified.
  app.openAPIRegistry.registerPath(route);
  app.post(PATH.replace("{account_id}", ":account_id"), (c) => receive(Object.assign(c, { [APP]: app as unknown as Parameters<typeof settleSetupIntentEvent>[0] })));
}
