// The parts of PUT /subscriptions/{id} (update.ts) that stand on their own: the plan a change
// moves to, checked against the current one, and a card update's vaulting, and its charge of a
// past_due subscription's unpaid period.
import type { Context } from "hono";
import type { AppEnv } from "../../context";
import { type BillableRow, type PeriodClaim, claimOf, claimPeriod, ownCardClaim } from "../../billing/periods";
import type { PlanRow } from "../../billing/pricing";
import { runBatch } from "../../db/batch";
import { type ClaimCard, plans } from "../../db/schema";
import { randomToken } from "../../lib/crypto";
import { ApiError, cardDeclined, invalidRequest } from "../../lib/errors";
import type { CardInput } from "../../payments/card-input";
import type { Processor } from "../../processor/types";
import { readById } from "../reads";
import { assertKeyClaimedFirst, commit, outcomeTracked } from "../write-path";
import { PERIOD_ALREADY_SETTLED, chargeOf, chargePeriod, hasUnsettledClaim, releaseClaim } from "../../billing/periods";
import { subscriptions } from "../../db/schema";
import { eq } from "drizzle-orm";
import { answerDecline, billingNow, changedMeanwhile, loadSubscription, type SubscriptionRow } from "./common";
import { serializeSubscription, subscriptionAnswer } from "../../billing/subscription-answer";
import { publicUrl } from "../../pages/public-url";

/**
 * The plan `planId` names, as a change of subscription `subscriptionId` from plan `current` may
 * take it: active, billed the same way (licensed or metered; a metered plan never changes), in
 * the same currency and interval. Otherwise a 400 naming plan_id.
 */
export async function newPlanFor(c: Context<AppEnv>, current: PlanRow, subscriptionId: string, planId: string): Promise<PlanRow> {
  const plan = await readById(c, plans, planId, "plan", "plan_id");
  if (!plan.active) throw invalidRequest("plan_inactive", `Plan ${plan.id} is archived and accepts no new subscriptions.`, "plan_id");
  if (current.usageType === "metered" && plan.usageType === "metered") {
    // The plan prices the open period's usage when the period ends: a new plan would reprice
    // usage reported under the old one.
    throw invalidRequest(
      "plan_incompatible",
      `Subscription ${subscriptionId} is metered: its plan ${current.id} prices the usage of the open period when that period ends, so it does not change (a new plan would reprice usage already reported).`,
      "plan_id",
    );
  }
  if (plan.usageType !== current.usageType) {
    throw invalidRequest(
      "plan_incompatible",
      `Plan ${plan.id} is ${plan.usageType}; the subscription's plan is ${current.usageType}. Cancel and subscribe to change how it is billed.`,
      "plan_id",
    );
  }
  if (plan.currency !== current.currency || plan.interval !== current.interval) {
    throw invalidRequest(
      "plan_incompatible",
      `Plan ${plan.id} bills in ${plan.currency} every ${plan.interval}; the subscription bills in ${current.currency} every ${current.interval}. Cancel and subscribe to change either.`,
      "plan_id",
    );
  }
  return plan;
}

/**
 * Vaults a card update's new card with the processor (no money moves; a live processor checks it
 * with its bank, a Stripe SetupIntent, which may decline it: 402, and nothing changes), and
 * answers the token and what the subscription shows of it.
 */
export async function vaultNewCard(c: Context<AppEnv>, processor: Processor, card: CardInput, user: { id: string; email: string }, subscriptionId: string, realNow: number): Promise<ClaimCard> {
  const { token, outcome } = await processor.vaultCard({
    card: card.card,
    customer: { id: user.id, email: user.email },
    reference: vaultReference(c, subscriptionId),
    firstAttemptAt: c.var.idempotency ? Date.parse(c.var.idempotency.since) : realNow,
  });
  if (outcome.status === "failed") throw cardDeclined(outcome.code, outcome.message);
  if (!token) throw new Error(`the processor vaulted the card of ${subscriptionId} without a token`);
  return { token, ...cardSummary(card) };
}

/**
 * The processor reference of vaulting a card update's new card: fixed for one use of the
 * request's Idempotency-Key (a retry vaults the same card once at Stripe), else new each time.
 */
function vaultReference(c: Context<AppEnv>, subscriptionId: string): string {
  const claim = c.var.idempotency;
  const { accountId, livemode } = c.var.auth;
  if (!claim) return `${subscriptionId}:card:${randomToken(20)}`;
  return `${accountId}${livemode ? ":live" : ""}:idempotency:${claim.key}:${claim.since}:card`;
}

/** What a subscription shows of a card, and its fingerprint: kept with a vaulted card's token. */
const cardSummary = (card: CardInput) => ({
  brand: card.summary.brand,
  last4: card.summary.last4,
  exp_month: card.summary.exp_month,
  exp_year: card.summary.exp_year,
  fingerprint: card.fingerprint,
});

/**
 * Claims the open period's next attempt for the vaulted card, or null when another worker holds
 * it. Should the claim's commit answer be lost, the period row says whether it committed (the
 * token is new, so a claim holding it is this one); if even that cannot be read, the outcome is
 * unknown and the key stays claimed (a claim that did commit is settled by the cron).
 */
export async function claimForCard(c: Context<AppEnv>, current: Pick<BillableRow, "sub" | "plan">, card: ClaimCard, realNow: number): Promise<PeriodClaim | null> {
  const { db } = c.var;
  try {
    const [claimed] = await runBatch(db, [claimPeriod(db, current, "card_update", realNow, realNow, card)]);
    return claimOf(claimed);
  } catch (error) {
    if (error instanceof ApiError) throw error;
    const own = await outcomeTracked(c, () => ownCardClaim(db, current.sub, card));
    if (own) return own;
    throw error;
  }
}

/**
 * Charges a past_due subscription's unpaid period to the card a card update gives, claimed as the
 * period's next attempt exactly as a dunning retry claims it (so the two never both charge), and
 * answers as PUT /subscriptions/{id} does: the subscription as the settlement committed it, or
 * the decline.
 */
export async function chargePastDue(
  c: Context<AppEnv>,
  current: Awaited<ReturnType<typeof loadSubscription>>,
  vaulted: ClaimCard,
  processor: Processor,
  changes: Partial<SubscriptionRow>,
  realNow: number,
) {
  const { db } = c.var;
  const { sub } = current;
  const claim = await claimForCard(c, current, vaulted, realNow);
  if (!claim) {
    // This request took its own stale Idempotency-Key claim over, and the period's next attempt
    // is claimed and unsettled: that may be this request's earlier run, whose charge's outcome
    // is unknown. The key is not freed (500 outcome_unknown; the cron settles the stale claim
    // with its own card and reference); any other request is told the subscription changed.
    if (c.var.idempotency?.takeover && current.period && hasUnsettledClaim(current)) {
      await outcomeTracked(c, () => Promise.reject(new Error(`card update of ${sub.id}: an earlier run's charge is unsettled`)));
    }
    throw changedMeanwhile();
  }
  // A processor call that still threw after its retries may have moved money: the outcome is
  // unknown, so the Idempotency-Key stays claimed, and the claim is given back for the cron.
  assertKeyClaimedFirst(c);
  try {
    const settlement = await outcomeTracked(c, () => chargePeriod(db, { processor, pageBase: publicUrl(c.env), row: current, claim, at: billingNow(current.clock, realNow), realNow, changes }));
    // Money moved: the settlement commits whatever became of the caller's key or claim meanwhile.
    const charged = chargeOf(settlement);
    const options = { moneyMoved: { paymentId: charged.payment.id }, claimGuard: false, failures: { [PERIOD_ALREADY_SETTLED]: changedMeanwhile } };
    if (!charged.succeeded) return await answerDecline(c, charged, settlement.writes, options);
    // The answer is the row as the settlement committed it (a concurrent change included).
    const where = eq(subscriptions.id, sub.id);
    const { returned } = await commit(c, { ...settlement.writes, returning: db.select().from(subscriptions).where(where) }, 200, null, {
      ...options,
      storedBody: subscriptionAnswer.stored(where),
    });
    // An earlier try of the settlement committed and its answer was lost: read the row it wrote.
    const row = (returned[0] as SubscriptionRow | undefined) ?? (await db.select().from(subscriptions).where(where))[0];
    return c.json(serializeSubscription(row), 200);
  } catch (error) {
    if (!(error instanceof ApiError)) await runBatch(db, [releaseClaim(db, sub, claim, realNow)]).catch(() => undefined);
    throw error;
  }
}
