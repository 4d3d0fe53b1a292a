// Named invariants of the money paths (../shared/STYLE.md "Proving money paths"), each read from
// the real D1 and, where money moved, from the processor ledger (test/support/faults.ts). Each
// throws an Error whose message starts with the invariant's name and lists every violation.
// A `since` mark limits a check to what happened after it, so one defect is reported by the case
// that caused it rather than by every case after it.
import { runInDurableObject } from "cloudflare:test";
import { env } from "./env";
import { schedulerFor, type WebhookRetryScheduler } from "../../src/webhooks/scheduler";
import type { Ledger, LedgerCall } from "./faults";

export class InvariantViolation extends Error {
  constructor(
    readonly invariant: string,
    readonly violations: string[],
  ) {
    super(`${invariant}: ${violations.length} violation(s)\n  - ${violations.slice(0, 12).join("\n  - ")}${violations.length > 12 ? `\n  … and ${violations.length - 12} more` : ""}`);
    this.name = "InvariantViolation";
  }
}

function check(invariant: string, violations: string[]) {
  if (violations.length > 0) throw new InvariantViolation(invariant, violations);
}

const all = async <T>(query: string, ...binds: unknown[]) => (await env.DB.prepare(query).bind(...binds).all<T>()).results;

const columns = new Map<string, Set<string>>();
async function hasColumn(table: string, column: string) {
  if (!columns.has(table)) columns.set(table, new Set((await all<{ name: string }>(`PRAGMA table_info("${table}")`)).map((c) => c.name)));
  return columns.get(table)!.has(column);
}

// ---------------------------------------------------------------------------------------------
// Marks

/** Where the ledger and the money tables stood at a moment: checks given it look only past it. */
export interface Mark {
  ledger: number;
  rowids: { payments: number; payouts: number; refunds: number; webhook_deliveries: number; events: number };
}

export async function mark(ledger: Ledger): Promise<Mark> {
  const [row] = await all<Mark["rowids"]>(
    `SELECT (SELECT coalesce(max(rowid), 0) FROM payments) AS payments, (SELECT coalesce(max(rowid), 0) FROM payouts) AS payouts,
      (SELECT coalesce(max(rowid), 0) FROM refunds) AS refunds, (SELECT coalesce(max(rowid), 0) FROM webhook_deliveries) AS webhook_deliveries,
      (SELECT coalesce(max(rowid), 0) FROM events) AS events`,
  );
  return { ledger: ledger.checkpoint(), rowids: row };
}

const callsSince = (ledger: Ledger, since?: Mark) => ledger.calls.slice(since?.ledger ?? 0);
const describeCall = (c: LedgerCall) =>
  `#${c.seq} ${c.method}(${c.reference}, ${c.amount} ${c.currency}) -> ${c.outcome}${c.moved ? " [moved money]" : ""}${c.replay ? " [replayed]" : ""}${c.overlapped ? " [while another call with this reference was in flight]" : ""}`;

// ---------------------------------------------------------------------------------------------
// The processor

export type ReferenceKind = "payout" | "refund" | "period_attempt" | "idempotency_key" | "proration";

const REFERENCE_KINDS: Record<ReferenceKind, (c: LedgerCall) => boolean> = {
  payout: (c) => c.method === "sendPayout",
  refund: (c) => c.method === "refund",
  period_attempt: (c) => (c.method === "chargeToken" || c.method === "chargeCard") && /:period:\d+:attempt:\d+$/.test(c.reference),
  idempotency_key: (c) => c.method === "chargeCard" && /:idempotency:/.test(c.reference),
  proration: (c) => c.method === "chargeToken" && /:proration:/.test(c.reference),
};

/**
 * At most one processor call per payout / refund / period attempt / Idempotency-Key: no reference
 * was sent while a call with it was still in flight, and, with `once`, no reference was sent
 * twice in the run at all (a retry after an unknown outcome legitimately resends it, so `once`
 * is for runs with no such fault).
 */
export function atMostOneProcessorCallPer(ledger: Ledger, kind: ReferenceKind, options: { once?: boolean; since?: Mark } = {}) {
  const name = `atMostOneProcessorCallPer(${kind})`;
  const byReference = new Map<string, LedgerCall[]>();
  for (const c of callsSince(ledger, options.since).filter(REFERENCE_KINDS[kind])) {
    byReference.set(c.reference, [...(byReference.get(c.reference) ?? []), c]);
  }
  const violations: string[] = [];
  for (const [reference, list] of byReference) {
    const overlapping = list.filter((c) => c.overlapped);
    if (overlapping.length > 0) violations.push(`${reference}: sent again while in flight: ${list.map(describeCall).join("; ")}`);
    else if (options.once && list.length > 1) violations.push(`${reference}: sent ${list.length} times: ${list.map(describeCall).join("; ")}`);
    if (list.filter((c) => c.moved).length > 1) violations.push(`${reference}: moved money ${list.filter((c) => c.moved).length} times`);
  }
  check(name, violations);
}

// ---------------------------------------------------------------------------------------------
// Payments

interface PaymentRow {
  rowid: number;
  id: string;
  amount: number;
  currency: string;
  status: string;
  charge_reference: string | null;
  processor_reference: string | null;
}

/**
 * Recorded payments equal processor charges: every charge the ledger made (chargeCard,
 * chargeToken) is recorded by exactly one completed / refunded / partially_refunded payment with
 * its charge reference, amount and the processor's reference; and every such payment stands for
 * a charge the ledger made. A failed payment moved no money.
 */
export async function paymentsEqualCharges(ledger: Ledger, options: { since?: Mark } = {}) {
  const name = "paymentsEqualCharges";
  // A one-off payment's authorization (authorizeCard) is its charge: captured at once, or held.
  const charges = ledger.moneyMoved(["chargeCard", "chargeToken", "authorizeCard"], options.since?.ledger ?? 0);
  const everCharged = new Map(ledger.moneyMoved(["chargeCard", "chargeToken", "authorizeCard"]).map((c) => [c.reference, c]));
  const rows = await all<PaymentRow>("SELECT rowid, id, amount, currency, status, charge_reference, processor_reference FROM payments");
  const violations: string[] = [];
  const byReference = new Map<string, PaymentRow[]>();
  for (const row of rows) if (row.charge_reference) byReference.set(row.charge_reference, [...(byReference.get(row.charge_reference) ?? []), row]);
  const moneyRow = (r: PaymentRow) => r.status !== "failed";

  for (const charge of charges) {
    const recorded = (byReference.get(charge.reference) ?? []).filter(moneyRow);
    if (recorded.length === 0) violations.push(`charge ${charge.reference} (${charge.amount} ${charge.currency}) moved money but no payment records it`);
    else if (recorded.length > 1) violations.push(`charge ${charge.reference} is recorded by ${recorded.length} payments: ${recorded.map((r) => r.id).join(", ")}`);
    else {
      const [p] = recorded;
      if (p.amount !== charge.amount || p.currency !== charge.currency) violations.push(`payment ${p.id} records ${p.amount} ${p.currency}; the processor charged ${charge.amount} ${charge.currency}`);
      if (p.processor_reference !== charge.processorReference) violations.push(`payment ${p.id} keeps processor reference ${p.processor_reference}; the charge was ${charge.processorReference}`);
    }
  }
  const inScope = (r: PaymentRow) => r.rowid > (options.since?.rowids.payments ?? 0) || charges.some((c) => c.reference === r.charge_reference);
  for (const row of rows.filter(inScope)) {
    if (!moneyRow(row)) {
      if (row.charge_reference && everCharged.has(row.charge_reference) && !(byReference.get(row.charge_reference) ?? []).some(moneyRow)) {
        violations.push(`payment ${row.id} is recorded failed, but the processor charged ${row.charge_reference}`);
      }
      continue;
    }
    if (!row.charge_reference) violations.push(`payment ${row.id} (${row.status}) has no charge reference`);
    else if (!everCharged.has(row.charge_reference)) violations.push(`payment ${row.id} (${row.status}, ${row.amount}) records charge ${row.charge_reference}, which the processor never made`);
  }
  check(name, violations);
}

/** For every payment: the refunds that are not failed sum to at most what it received (its amount, for a charge captured at once), and so does amount_refunded. */
export async function refundsNeverExceedPayment() {
  const rows = await all<{ id: string; amount: number; amount_received: number; amount_refunded: number; refunded: number; status: string }>(
    `SELECT p.id, p.amount, p.amount_received, p.amount_refunded, p.status, coalesce((SELECT sum(r.amount) FROM refunds r WHERE r.payment_id = p.id AND r.status <> 'failed'), 0) AS refunded
     FROM payments p`,
  );
  const violations: string[] = [];
  for (const p of rows) {
    if (p.refunded > p.amount) violations.push(`payment ${p.id}: refunds not failed sum to ${p.refunded} > amount ${p.amount}`);
    if (p.amount_refunded > p.amount_received || p.amount_received > p.amount || p.amount_refunded < 0) {
      violations.push(`payment ${p.id}: amount_refunded ${p.amount_refunded} outside 0..${p.amount_received} (received of ${p.amount})`);
    }
    if (p.amount_refunded !== p.refunded) violations.push(`payment ${p.id}: amount_refunded ${p.amount_refunded} but its refunds not failed sum to ${p.refunded}`);
  }
  check("refundsNeverExceedPayment", violations);
}

/** Each refund moved money at the processor at most once, and a succeeded refund did move it. */
export async function refundsSentOnce(ledger: Ledger, options: { since?: Mark } = {}) {
  const calls = callsSince(ledger, options.since).filter((c) => c.method === "refund");
  const violations: string[] = [];
  const ids = [...new Set(calls.map((c) => c.reference))];
  for (const id of ids) {
    const moved = ledger.calls.filter((c) => c.method === "refund" && c.reference === id && c.moved);
    if (moved.length > 1) violations.push(`refund ${id} moved money ${moved.length} times`);
  }
  const rows = await all<{ id: string; status: string; amount: number }>(
    `SELECT id, status, amount FROM refunds WHERE rowid > ?`,
    options.since?.rowids.refunds ?? 0,
  );
  for (const r of rows) {
    const moved = ledger.calls.filter((c) => c.method === "refund" && c.reference === r.id && c.moved);
    if (r.status === "succeeded" && moved.length !== 1) violations.push(`refund ${r.id} is succeeded but the processor refunded it ${moved.length} times`);
    if (r.status === "failed" && moved.length > 0) violations.push(`refund ${r.id} is failed but the processor refunded it`);
    if (moved[0] && moved[0].amount !== r.amount) violations.push(`refund ${r.id} is ${r.amount}; the processor refunded ${moved[0].amount}`);
  }
  check("refundsSentOnce", violations);
}

// ---------------------------------------------------------------------------------------------
// Payouts

const payoutIdOf = (reference: string) => /po_[0-9A-Za-z]+/.exec(reference)?.[0] ?? reference;

/**
 * Each payout reached sendPayout as money-moving at most once (whatever reference it was sent
 * with); a canceled payout never reached the processor; a paid payout moved its amount exactly
 * once, and a failed one moved nothing.
 */
export async function payoutsSentOnce(ledger: Ledger, options: { since?: Mark } = {}) {
  const sends = ledger.calls.filter((c) => c.method === "sendPayout");
  const recent = new Set(callsSince(ledger, options.since).filter((c) => c.method === "sendPayout").map((c) => payoutIdOf(c.reference)));
  const rows = await all<{ id: string; status: string; amount: number; rowid: number }>("SELECT rowid, id, status, amount FROM payouts");
  const violations: string[] = [];
  for (const p of rows) {
    if (!(recent.has(p.id) || p.rowid > (options.since?.rowids.payouts ?? 0))) continue;
    const mine = sends.filter((c) => payoutIdOf(c.reference) === p.id);
    const moved = mine.filter((c) => c.moved);
    if (moved.length > 1) violations.push(`payout ${p.id} moved money ${moved.length} times: ${moved.map(describeCall).join("; ")}`);
    if (p.status === "canceled" && mine.length > 0) violations.push(`payout ${p.id} is canceled but reached the processor: ${mine.map(describeCall).join("; ")}`);
    if (p.status === "paid" && moved.length !== 1) violations.push(`payout ${p.id} is paid but moved money ${moved.length} times`);
    if (p.status === "failed" && moved.length > 0) violations.push(`payout ${p.id} is failed but the processor paid it`);
    for (const c of moved) if (c.amount !== p.amount) violations.push(`payout ${p.id} is ${p.amount}; the processor sent ${c.amount}`);
  }
  check("payoutsSentOnce", violations);
}

// ---------------------------------------------------------------------------------------------
// Webhooks

/**
 * After quiescing, no delivery is silently pending: a pending delivery either has its next
 * attempt scheduled (and the endpoint's retry scheduler holds it) or is held by a live lease.
 */
export async function everyEventDeliveredOrFailed(options: { now?: number; since?: Mark } = {}) {
  const now = options.now ?? Date.now();
  const lease = (await hasColumn("webhook_deliveries", "lease_until")) ? "lease_until" : "NULL";
  const rows = await all<{ id: string; endpoint_id: string; next_attempt_at: number | null; lease_until: number | null; attempt_count: number; last_error: string | null }>(
    `SELECT id, endpoint_id, next_attempt_at, ${lease} AS lease_until, attempt_count, last_error FROM webhook_deliveries WHERE status = 'pending' AND rowid > ?`,
    options.since?.rowids.webhook_deliveries ?? 0,
  );
  const violations: string[] = [];
  const scheduledOf = new Map<string, Set<string>>();
  for (const d of rows) {
    if (d.lease_until !== null && d.lease_until > now) continue;
    if (d.next_attempt_at === null) {
      violations.push(`delivery ${d.id} is pending with no next attempt and no lease (attempts ${d.attempt_count}, last error ${d.last_error})`);
      continue;
    }
    if (!scheduledOf.has(d.endpoint_id)) {
      const held = await runInDurableObject(schedulerFor(env, d.endpoint_id), (o: WebhookRetryScheduler) => o.pending().map((p) => p.deliveryId));
      scheduledOf.set(d.endpoint_id, new Set(held));
    }
    if (!scheduledOf.get(d.endpoint_id)!.has(d.id)) violations.push(`delivery ${d.id} waits for an attempt at ${d.next_attempt_at} that its endpoint's scheduler does not hold`);
  }
  check("everyEventDeliveredOrFailed", violations);
}

/**
 * Every event reaches each of `endpointIds` that takes it exactly once: an event of the endpoint's
 * account and mode, made since the endpoint was, of a type it is subscribed to (or `*`), has one
 * delivery to it. (For endpoints whose subscription does not change during the checks: the
 * events an endpoint takes are read as they are now.)
 */
export async function everyEventReachesItsEndpoints(endpointIds: string[], options: { since?: Mark } = {}) {
  const violations: string[] = [];
  for (const endpointId of endpointIds) {
    const rows = await all<{ id: string; type: string; deliveries: number }>(
      `SELECT ev.id, ev.type, (SELECT count(*) FROM webhook_deliveries d WHERE d.event_id = ev.id AND d.endpoint_id = ep.id) AS deliveries
       FROM webhook_endpoints ep JOIN events ev ON ev.account_id = ep.account_id AND ev.livemode = ep.livemode
       WHERE ep.id = ? AND ev.rowid > ? AND ev.created_at >= ep.created_at AND ev.type <> 'webhook.test'
         AND EXISTS (SELECT 1 FROM json_each(ep.events) WHERE value IN (ev.type, '*'))`,
      endpointId,
      options.since?.rowids.events ?? 0,
    );
    for (const r of rows) if (r.deliveries !== 1) violations.push(`event ${r.id} (${r.type}) has ${r.deliveries} deliveries to endpoint ${endpointId}, which takes it`);
  }
  check("everyEventReachesItsEndpoints", violations);
}

/**
 * A delivery stays in its account and mode: its event, its endpoint and the delivery itself are of
 * one account and one mode.
 */
export async function deliveriesStayInTheirAccount(options: { since?: Mark } = {}) {
  const rows = await all<{ id: string; event_id: string; endpoint_id: string }>(
    `SELECT d.id, d.event_id, d.endpoint_id FROM webhook_deliveries d
       JOIN events ev ON ev.id = d.event_id JOIN webhook_endpoints ep ON ep.id = d.endpoint_id
     WHERE d.rowid > ? AND NOT (ev.account_id = ep.account_id AND ev.livemode = ep.livemode AND d.account_id = ev.account_id AND d.livemode = ev.livemode)`,
    options.since?.rowids.webhook_deliveries ?? 0,
  );
  check("deliveriesStayInTheirAccount", rows.map((r) => `delivery ${r.id} of event ${r.event_id} to endpoint ${r.endpoint_id} crosses accounts or modes`));
}

/**
 * One 2xx ends a delivery: every delivery that a receiver acknowledged (a recorded attempt with
 * a 2xx status) is `delivered`, and no delivery has more than one acknowledged attempt.
 */
export async function acknowledgedDeliveriesDelivered(options: { since?: Mark } = {}) {
  const rows = await all<{ id: string; status: string; acks: number }>(
    `SELECT d.id, d.status, (SELECT count(*) FROM delivery_attempts a WHERE a.delivery_id = d.id AND a.status_code BETWEEN 200 AND 299) AS acks
     FROM webhook_deliveries d WHERE d.rowid > ?`,
    options.since?.rowids.webhook_deliveries ?? 0,
  );
  const violations: string[] = [];
  for (const d of rows) {
    if (d.acks > 0 && d.status !== "delivered") violations.push(`delivery ${d.id} was acknowledged with a 2xx but is ${d.status}`);
    if (d.acks > 1) violations.push(`delivery ${d.id} was acknowledged ${d.acks} times (sent again after a 2xx)`);
  }
  check("acknowledgedDeliveriesDelivered", violations);
}

// ---------------------------------------------------------------------------------------------
// Data at rest

export interface CardsUsed {
  pans: Iterable<string>;
  cvvs: Iterable<string>;
}

const SECRET_PATTERN = /(whsec_[A-Za-z0-9+/=]{8,}|sk_test_[A-Za-z0-9]{8,}|rk_test_[A-Za-z0-9]{8,}|sk_live_[A-Za-z0-9]{8,}|rk_live_[A-Za-z0-9]{8,})/;
const tokenOf = (value: string) => new RegExp(`(^|[^0-9A-Za-z])${value}([^0-9A-Za-z]|$)`);

/**
 * No PAN (nor its first 12 digits) and no CVV anywhere in the database, no stored "card_number"
 * or "cvv" field, and no secret (whsec_, sk_test_, rk_test_, sk_live_, rk_live_) in a stored idempotent
 * answer or an event payload.
 */
export async function noSecretOrCardAtRest(cards: CardsUsed) {
  const pans = [...new Set([...cards.pans].map((p) => p.replace(/[ -]/g, "")))];
  const cvvs = [...new Set(cards.cvvs)].map((cvv) => ({ cvv, token: tokenOf(cvv) }));
  const tables = (await all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")).map((t) => t.name).filter((n) => !n.startsWith("_cf_"));
  const violations: string[] = [];
  for (const table of tables) {
    for (const row of await all<Record<string, unknown>>(`SELECT * FROM "${table}"`)) {
      for (const [column, value] of Object.entries(row)) {
        if (value === null || value === undefined) continue;
        const text = typeof value === "string" ? value : value instanceof ArrayBuffer ? new TextDecoder().decode(value) : String(value);
        const where = `${table}.${column}`;
        for (const pan of pans) {
          if (text.includes(pan)) violations.push(`PAN ${pan.slice(-4)} in ${where}`);
          else if (text.includes(pan.slice(0, 12))) violations.push(`PAN prefix of ${pan.slice(-4)} in ${where}`);
        }
        if (typeof value === "string") {
          for (const { cvv, token } of cvvs) if (token.test(text)) violations.push(`CVV ${cvv} in ${where}: ${text.slice(0, 120)}`);
          if (/"(card_number|cvv)"/.test(text)) violations.push(`card field stored in ${where}`);
          const secretColumn = (table === "idempotency_keys" && column === "response_body") || (table === "events" && column === "payload");
          if (secretColumn && SECRET_PATTERN.test(text)) violations.push(`secret ${SECRET_PATTERN.exec(text)![0].slice(0, 10)}… stored in ${where}`);
        }
      }
    }
  }
  check("noSecretOrCardAtRest", violations);
}
