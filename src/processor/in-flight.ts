// Live money in flight: the one home of the rule that money a request moves at the processor before
// its own batch can record it (a first charge, an invoice paid now, a past-due card charged) is
// recorded only against the connection it went through, on the shard where the account lives.
//
//  - Before it calls the processor, the request takes a claim (money_claims), in one batch with
//    its key check and, in live mode, with the connection it is about to charge through: no
//    connection, no claim (400 livemode_unavailable), and a paused key (an account move) none either.
//  - Its commit carries `claimHeld`: the claim is still there, the connection is still the same
//    Stripe account, and the account still lives on this shard; the batch deletes the claim.
//  - DELETE /api/processor, and a PUT that names another Stripe account, carry `noMoneyInFlight`:
//    refused with 409 processor_in_use (Retry-After) while an unexpired claim exists. Both batches
//    run on the same SQLite database, so a claim and a disconnect serialize: whichever commits
//    first wins, and the other is refused.
//  - An account move waits, after pausing its keys, until no unexpired claim is left
//    (src/accounts/move.ts), and its switch is guarded by the same condition.
//
// A claim whose worker died runs out at lease_until, longer than any processor call can take (a
// Stripe request's four tries with their timeouts and Retry-After waits, three requests for a
// charge). Its late commit, if the worker was alive after all, meets the guard: the connection
// changed, or the account moved, and the request answers 500 outcome_unknown with its
// Idempotency-Key still claimed, so its retry (the same processor reference) records the charge
// where the account lives. Nothing is recorded against the wrong connection or lost on a shard the
// account has left.
import { type Placeholder, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { BATCH_GUARD_SQL, type Statement, guard, rawStatement, runBatch } from "../db/batch";
import { type Caller, type Tenant, liveCredential } from "../db/scope";
import { moneyClaims } from "../db/schema";
import { randomToken } from "../lib/crypto";
import { ApiError } from "../lib/errors";

/** How long a claim outlives a worker that died holding it (ms). */
export const MONEY_CLAIM_LEASE_MS = 10 * 60_000;

export type MoneyPurpose = "first_charge" | "invoice_payment" | "proration_charge" | "past_due_charge" | "one_off_payment" | "payment_capture" | "payment_cancel";

/** A claim a request holds while its money is at the processor. */
export interface MoneyClaim {
  id: string;
  tenant: Tenant;
  /** Until its commit (or the end of the request) deletes it. */
  held: boolean;
}

/** Guard reasons (src/db/batch.ts). */
export const MONEY_CLAIM_REFUSED = "money_claim_refused";
export const NO_CONNECTION = "money_claim_no_connection";
export const MONEY_CLAIM_LOST = "money_claim_lost";
export const MONEY_IN_FLIGHT = "money_in_flight";

/** Seconds a caller refused by money in flight should wait. */
const RETRY_AFTER_SECONDS = 5;

/**
 * A claim for money the caller is about to move, taken in one batch: the caller's key is live
 * (not revoked, not paused by a move), and in live mode the account has a connection, whose
 * Stripe account the claim names. Refusals: `failures` maps them (a dead key, no connection).
 */
export const newMoneyClaim = (tenant: Tenant, requestKey?: string): MoneyClaim => ({
  // Under an Idempotency-Key the claim is the request's (its key and first attempt), so that a
  // retry after an unknown outcome takes over the claim its earlier run kept (releaseMoneyClaim).
  id: requestKey === undefined ? `mcl_${randomToken(16)}` : `mcl_${requestKey}`,
  tenant: { accountId: tenant.accountId, livemode: tenant.livemode },
  held: true,
});

/**
 * Takes `claim` (newMoneyClaim) for money the caller is about to move. The claim is made before
 * its batch runs, so that a batch whose answer is lost (it may have committed) is still ended by
 * whoever drops it.
 */
export async function takeMoneyClaim(
  db: Db,
  claim: MoneyClaim,
  caller: Caller,
  purpose: MoneyPurpose,
  now: number,
  failures: { credential: () => ApiError; noConnection: () => ApiError },
): Promise<void> {
  const { id } = claim;
  const { accountId, livemode } = caller;
  await runBatch(
    db,
    [
      rawStatement(db, BATCH_GUARD_SQL(MONEY_CLAIM_REFUSED, liveCredential(caller))),
      ...(livemode ? [guard(db, NO_CONNECTION, sql`EXISTS (SELECT 1 FROM processor_connections WHERE account_id = ${accountId})`)] : []),
      rawStatement(
        db,
        sql`INSERT INTO ${moneyClaims} (id, account_id, livemode, processor_account, purpose, created_at, lease_until)
          VALUES (${id}, ${accountId}, ${livemode ? 1 : 0},
            ${livemode ? sql`(SELECT processor_account FROM processor_connections WHERE account_id = ${accountId})` : null},
            ${purpose}, ${new Date(now).toISOString()}, ${now + MONEY_CLAIM_LEASE_MS})
          ON CONFLICT (id) DO UPDATE SET processor_account = excluded.processor_account, purpose = excluded.purpose,
            created_at = excluded.created_at, lease_until = excluded.lease_until`,
      ),
    ],
    { [MONEY_CLAIM_REFUSED]: failures.credential, [NO_CONNECTION]: failures.noConnection },
  );
}

/** SQL: the account of `accountId` lives on this shard (a move has not switched it away). */
export const accountLivesHere = (accountId: string | Placeholder) => sql`NOT EXISTS (SELECT 1 FROM accounts WHERE id = ${accountId} AND moved_to IS NOT NULL)`;

/**
 * For the commit of the money the claim covers: the claim is still there, the account still lives
 * here, and (live) its connection is still the Stripe account the claim names.
 */
export function claimHeld(db: Db, claim: MoneyClaim): Statement {
  const { accountId, livemode } = claim.tenant;
  const sameConnection = livemode
    ? sql`EXISTS (SELECT 1 FROM money_claims AS mc JOIN processor_connections AS pc ON pc.account_id = mc.account_id AND pc.processor_account = mc.processor_account WHERE mc.id = ${claim.id})`
    : sql`EXISTS (SELECT 1 FROM money_claims WHERE id = ${claim.id})`;
  return guard(db, MONEY_CLAIM_LOST, sql`${sameConnection} AND ${accountLivesHere(accountId)}`);
}

/** Ends the claim: a statement of the commit's batch. */
export const releaseClaim = (db: Db, claim: MoneyClaim): Statement => rawStatement(db, sql`DELETE FROM money_claims WHERE id = ${claim.id}`);

/** Ends a claim that no commit ended (the request failed or was refused): best effort, its lease ends it otherwise. */
export async function dropMoneyClaim(db: Db, claim: MoneyClaim): Promise<void> {
  if (!claim.held) return;
  claim.held = false;
  await runBatch(db, [releaseClaim(db, claim)]).catch((error) => {
    console.error(JSON.stringify({ message: "money claim not released (its lease ends it)", claim: claim.id, error: String(error) }));
  });
}

/** SQL: live money of the account is at the processor right now (an unexpired claim). */
const liveClaimsOf = (accountId: string, now: number) =>
  sql`EXISTS (SELECT 1 FROM money_claims WHERE account_id = ${accountId} AND livemode = 1 AND lease_until > ${now})`;

/**
 * For DELETE /api/processor, and PUT with `newProcessorAccount` (only a change of Stripe account is
 * refused; a rolled key of the same one is not): refused while live money is at the processor.
 */
export function noMoneyInFlight(db: Db, accountId: string, now: number, newProcessorAccount?: string): Statement {
  const changes =
    newProcessorAccount === undefined
      ? sql`1`
      : sql`EXISTS (SELECT 1 FROM processor_connections WHERE account_id = ${accountId} AND processor_account <> ${newProcessorAccount})`;
  return guard(db, MONEY_IN_FLIGHT, sql`NOT (${changes} AND ${liveClaimsOf(accountId, now)})`);
}

/** The answer of a connection change refused by money in flight. */
export const moneyInFlight = () =>
  new ApiError(
    409,
    "invalid_request_error",
    "processor_in_use",
    "A live payment is being made through the connected Stripe account right now. Nothing was changed; retry after the Retry-After seconds.",
    undefined,
    { "Retry-After": String(RETRY_AFTER_SECONDS) },
  );

/** The failure map entry a connection change adds. */
export const moneyInFlightFailures = { [MONEY_IN_FLIGHT]: moneyInFlight };

/** The account's unexpired claims on this shard (either mode), and when the last of them runs out (epoch ms). */
export async function claimsInFlight(db: Db, accountId: string, now: number): Promise<{ count: number; until: number | null }> {
  const row = await db.$client
    .prepare("SELECT count(*) AS n, max(lease_until) AS until FROM money_claims WHERE account_id = ? AND lease_until > ?")
    .bind(accountId, now)
    .first<{ n: number; until: number | null }>();
  return { count: Number(row?.n ?? 0), until: row?.until ?? null };
}

/** SQL for a move's switch: no claim of the account is in flight on this shard. */
export const noClaimsInFlight = (accountId: string, now: number) => sql`NOT EXISTS (SELECT 1 FROM money_claims WHERE account_id = ${accountId} AND lease_until > ${now})`;
