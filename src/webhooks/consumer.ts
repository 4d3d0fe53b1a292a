// The delivery queue's consumer. For one delivery: load it with its event and endpoint, claim
// the next attempt with a lease (a conditional update: while an attempt is in flight, for up to
// DELIVERY_LEASE_MS, no other message sends the delivery), POST the exact body with its
// signatures, record the attempt, then either finish the delivery or hand the next attempt to
// the endpoint's retry scheduler. A 2xx always marks the delivery delivered, whichever attempt
// got it; a failure is recorded only by the attempt that still holds the delivery.
import { and, desc, eq, gt, inArray, isNull, lt, lte, ne, or, sql } from "drizzle-orm";
import { type Db, createDb } from "../db/client";
import { rawStatement, runBatch, type Statement } from "../db/batch";
import { type GatherTicket, gatherBatches } from "../db/gathered";
import { deliveryAttempts, events, webhookDeliveries, webhookEndpoints } from "../db/schema";
import { newId } from "../domain/ids";
import { DELIVERY_WINDOW_MS, nextAttemptAt, parseRetryAfter } from "../domain/webhook-retry-schedule";
import type { Bindings, RuntimeBindings } from "../env";
import { messageEnv } from "../db/shards";
import { clock, isoTime } from "../lib/clock";
import { randomUnit } from "../lib/crypto";
import { type DeliveryMessage, collectDeliveryIds, enqueueDeliveries } from "./outbox";
import { deliveryExhaustedEvent, disableEndpoint, endedByAttempt, endedLate, failingLongEnough, recordFailure, recordSuccess } from "./health";
import { schedulerFor } from "./scheduler";
import type { Permit } from "./throttle";
import { isOverload, slowedUntilAfter } from "../domain/webhook-throttle";
import { deliveredBody } from "./payload";
import { signatureHeaders } from "./signing";

export const DELIVERY_TIMEOUT_MS = 15_000;
/** How long an attempt holds its delivery: the request's timeout, and time to record the result. */
export const DELIVERY_LEASE_MS = DELIVERY_TIMEOUT_MS + 15_000;
export const RESPONSE_EXCERPT_BYTES = 1024;
export const USER_AGENT = "Tender-Webhooks/1.0 (+https://tender.dev/docs/webhooks)";

export type DeliveryOutcome =
  | "delivered"
  | "scheduled"
  | "failed"
  | "endpoint_gone"
  | "leased"
  | "waiting"
  | "throttled"
  | "skipped"
  /** The failure disabled the endpoint (it failed for 5 days): this delivery ended with the others. */
  | "endpoint_disabled";

async function excerpt(response: Response): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < RESPONSE_EXCERPT_BYTES) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
  }
  await reader.cancel().catch(() => {});
  const bytes = new Uint8Array(Math.min(size, RESPONSE_EXCERPT_BYTES));
  let offset = 0;
  for (const chunk of chunks) {
    const take = chunk.subarray(0, bytes.length - offset);
    bytes.set(take, offset);
    offset += take.byteLength;
    if (offset >= bytes.length) break;
  }
  return new TextDecoder().decode(bytes);
}

const loaded = (db: Db) =>
  db
    .select({ delivery: webhookDeliveries, event: events, endpoint: webhookEndpoints })
    .from(webhookDeliveries)
    .innerJoin(events, eq(events.id, webhookDeliveries.eventId))
    .innerJoin(webhookEndpoints, eq(webhookEndpoints.id, webhookDeliveries.endpointId));

/** A delivery as the consumer reads it: with its event and its endpoint. */
export type LoadedDelivery = Awaited<ReturnType<typeof load>>;

async function load(db: Db, deliveryId: string) {
  const [row] = await loaded(db).where(eq(webhookDeliveries.id, deliveryId)).limit(1);
  return row;
}

/** Bound parameters per statement stay under D1's 100. */
const LOAD_CHUNK = 90;

/**
 * The deliveries of a queue batch, read in one statement (a chunk of LOAD_CHUNK ids each) rather
 * than one read per message. What each message does next is decided from this read exactly as from
 * its own: every write after it is conditional on the row still being as read (the claim's status,
 * attempt count and lease), so a row that changed meanwhile sends nothing twice.
 */
export async function loadDeliveries(db: Db, deliveryIds: string[]): Promise<Map<string, NonNullable<LoadedDelivery>>> {
  const ids = [...new Set(deliveryIds)];
  const rows = new Map<string, NonNullable<LoadedDelivery>>();
  for (let i = 0; i < ids.length; i += LOAD_CHUNK) {
    for (const row of await loaded(db).where(inArray(webhookDeliveries.id, ids.slice(i, i + LOAD_CHUNK)))) rows.set(row.delivery.id, row);
  }
  return rows;
}

/**
 * How an attempt's claim and its record reach D1 when its queue batch gathers them
 * (src/db/gathered.ts): each in one batch with the other messages' (of the same shard).
 */
export interface GatheredWrites {
  claim: GatherTicket;
  record: GatherTicket;
}

/**
 * One attempt of one delivery. `preloaded` is the delivery as its queue batch read it
 * (`loadDeliveries`; null: no such delivery); absent, it is read here. `gathered`: the claim and
 * the record go to D1 with the queue batch's others; absent, each is a round trip of its own.
 */
export async function processDelivery(
  env: Bindings,
  deliveryId: string,
  random: () => number = randomUnit,
  preloaded?: LoadedDelivery | null,
  gathered?: GatheredWrites,
): Promise<DeliveryOutcome> {
  const db = createDb(env.DB);
  const row = preloaded === undefined ? await load(db, deliveryId) : preloaded;
  if (!row) return "skipped";
  const { delivery, event, endpoint } = row;
  if (delivery.status !== "pending") {
    // The delivery has ended. This may be the queue's retry of the message whose wake-up of the
    // waiting deliveries failed after the end was recorded: wake them now (a no-op otherwise).
    await wakeWaiting(env, db, delivery, event);
    return "skipped";
  }
  const now = clock.now();

  // Another worker's attempt is in flight: it records the result (or, should it die, the lease
  // runs out and the sweeper sends the delivery again).
  if (delivery.leaseUntil !== null && delivery.leaseUntil > now) return "leased";

  // Deliveries are made only to endpoints of the event's account and mode (src/webhooks/outbox.ts);
  // should a row ever pair them otherwise, the event is not sent to another tenant or mode.
  const foreign = endpoint.accountId !== event.accountId || endpoint.livemode !== event.livemode;
  if (foreign || endpoint.status !== "active" || endpoint.deletedAt) {
    await db
      .update(webhookDeliveries)
      .set({ status: "failed", lastError: foreign ? "endpoint_mismatch" : "endpoint_disabled", nextAttemptAt: null, waitingFor: null, updatedAt: now })
      .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.status, "pending")));
    // An end like any other: the deliveries waiting for it are woken (and end the same way while
    // the endpoint stays disabled), rather than waiting for the sweeper.
    await wakeWaiting(env, db, delivery, event);
    return "skipped";
  }
  // A message that arrives before the delivery's next attempt is due (a sweeper duplicate, or a
  // redelivered message): make sure the scheduler holds it, and send nothing now. A slot the
  // endpoint's object already holds for it decides instead (a rate_limit raised or removed since
  // moved it earlier); with none held, asking schedules it, takes no slot, and is all an endpoint
  // that was never throttled does.
  const throttled = endpoint.rateLimit !== null || (endpoint.slowedUntil !== null && endpoint.slowedUntil > now);
  let permit: Permit | null = null;
  if (delivery.nextAttemptAt !== null && delivery.nextAttemptAt > now) {
    permit = await schedulerFor(env, endpoint.id).acquire(deliveryId, delivery.attemptCount + 1, endpoint.rateLimit, env.SHARD, delivery.nextAttemptAt);
    if (!permit.go) return "scheduled";
  }

  // Ordered delivery: on a per_object endpoint, the pending delivery just before this one about the
  // same object holds this one back. When that one ends (delivered, or failed after its
  // window), it wakes this one; the sweeper re-checks a waiting delivery every minute as well.
  // The wait is recorded only while the earlier delivery is still pending, in one statement: had
  // it ended between the check and the write, its wake-up found nobody waiting, and this delivery
  // would wait for the sweeper. Then it looks again (a later one may be next, or none).
  if (endpoint.ordering === "per_object" && event.objectId !== null && event.sequence !== null) {
    for (let look = 1; ; look++) {
      const earlier = await earlierPending(db, endpoint.id, event.objectId, event.sequence, deliveryId);
      if (!earlier) break;
      const recorded = await db
        .update(webhookDeliveries)
        .set({ waitingFor: earlier, updatedAt: now })
        .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.status, "pending"), stillPending(earlier)))
        .returning({ id: webhookDeliveries.id });
      if (recorded.length > 0) return "waiting";
      const [self] = await db.select({ status: webhookDeliveries.status }).from(webhookDeliveries).where(eq(webhookDeliveries.id, deliveryId));
      if (self?.status !== "pending") return "skipped";
      if (look >= MAX_WAIT_LOOKS) {
        // Earlier deliveries keep ending under our feet: check again from the queue.
        await enqueueDeliveries(env.DELIVERY_QUEUE, [deliveryId]);
        return "waiting";
      }
    }
  }

  // Throttle (src/domain/webhook-throttle.ts): on an endpoint with a rate_limit, or one a
  // receiver's overload answer slowed, the attempt takes a slot from the endpoint's Durable
  // Object; when it must wait, the object sends it back at its slot. Waiting is not an attempt,
  // and the window below is judged at the time the attempt fell due. Other endpoints skip this.
  let dueAt = now;
  if (throttled || permit) {
    permit ??= await schedulerFor(env, endpoint.id).acquire(deliveryId, delivery.attemptCount + 1, endpoint.rateLimit, env.SHARD);
    if (!permit.go) {
      // Shown as next_attempt_at, and the sweeper leaves it alone until then (not a minute later).
      if (permit.at !== delivery.nextAttemptAt) {
        await db
          .update(webhookDeliveries)
          .set({ nextAttemptAt: permit.at, updatedAt: now })
          .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.status, "pending"), eq(webhookDeliveries.attemptCount, delivery.attemptCount)));
      }
      return "throttled";
    }
    dueAt = Math.min(now, permit.askedAt);
  }

  // However late a message arrives (a lost alarm, a sweeper re-enqueue), nothing is sent later
  // than 24 hours after the first attempt: the delivery ends failed, and can be redelivered.
  if (delivery.firstAttemptAt !== null && dueAt > delivery.firstAttemptAt + DELIVERY_WINDOW_MS) {
    // Its window ended without a 2xx: webhook_delivery.exhausted, once (src/webhooks/health.ts).
    const exhausted = deliveryExhaustedEvent(db, { ...delivery, eventType: event.type }, delivery.firstAttemptAt, now, endedLate);
    const results = await runBatch(db, [
      db
        .update(webhookDeliveries)
        .set({ status: "failed", lastError: "retry_window_ended", nextAttemptAt: null, waitingFor: null, updatedAt: now })
        .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.status, "pending"), eq(webhookDeliveries.attemptCount, delivery.attemptCount))),
      ...(exhausted?.statements ?? []),
    ]);
    if (exhausted) await enqueueHealthEvents(env, results, [2]);
    await wakeWaiting(env, db, delivery, event);
    return "failed";
  }

  const attemptNumber = delivery.attemptCount + 1;
  const firstAttemptAt = delivery.firstAttemptAt ?? now;
  const claim = db
    .update(webhookDeliveries)
    .set({ attemptCount: attemptNumber, firstAttemptAt, nextAttemptAt: null, leaseUntil: now + DELIVERY_LEASE_MS, waitingFor: null, updatedAt: now })
    .where(
      and(
        eq(webhookDeliveries.id, deliveryId),
        eq(webhookDeliveries.status, "pending"),
        eq(webhookDeliveries.attemptCount, delivery.attemptCount),
        or(isNull(webhookDeliveries.leaseUntil), lte(webhookDeliveries.leaseUntil, now)),
      ),
    )
    .returning({ id: webhookDeliveries.id });
  // The claim commits before the POST, gathered or not: a gathered batch is sent before any of
  // its callers goes on.
  const claimed = gathered ? ((await gathered.claim.run([claim]))[0] as { id: string }[]) : await claim;
  if (claimed.length === 0) return "skipped";

  const previousLive = endpoint.previousSecret && endpoint.previousSecretExpiresAt && Date.parse(endpoint.previousSecretExpiresAt) > now;
  const body = deliveredBody(event.payload);
  const headers = {
    "Content-Type": "application/json",
    "User-Agent": USER_AGENT,
    "Tender-Delivery-Attempt": String(attemptNumber),
    // The event's place among its object's events: a receiver that sees n + 2 before n + 1 knows
    // one is missing, and can read it from the events feed.
    ...(event.objectId && event.sequence !== null ? { "Tender-Sequence": `${event.objectId}/${event.sequence}` } : {}),
    ...(await signatureHeaders({ current: endpoint.secret, previous: previousLive ? endpoint.previousSecret : null }, event.id, body, now)),
  };

  const started = performance.now();
  let status: number | null = null;
  let responseExcerpt: string | null = null;
  let error: string | null = null;
  let retryAfterMs: number | null = null;
  try {
    const signal = AbortSignal.timeout(DELIVERY_TIMEOUT_MS);
    const response = await fetch(endpoint.url, { method: "POST", headers, body, redirect: "manual", signal });
    // An answer that came after the timeout fired is a timeout: the attempt is retried.
    if (signal.aborted) throw signal.reason;
    status = response.status;
    retryAfterMs = isOverload(status) ? parseRetryAfter(response.headers.get("retry-after"), now) : null;
    responseExcerpt = await excerpt(response);
  } catch (cause) {
    error = cause instanceof Error && cause.name === "TimeoutError" ? `timeout after ${DELIVERY_TIMEOUT_MS} ms` : `network error: ${String(cause)}`.slice(0, 500);
  }
  const durationMs = Math.round(performance.now() - started);

  const ok = status !== null && status >= 200 && status < 300;
  const gone = status === 410;
  const overloaded = isOverload(status);
  const next = ok || gone ? null : nextAttemptAt({ firstAttemptAt, failedAttempts: attemptNumber, now, retryAfterMs, random });
  const outcome: DeliveryOutcome = ok ? "delivered" : gone ? "endpoint_gone" : next === null ? "failed" : "scheduled";

  // Our attempt still holds the delivery when no later attempt has been claimed, and no
  // redelivery reset its window meanwhile (a redelivery sets first_attempt_at back to NULL). A
  // 2xx marks it delivered whatever happened meanwhile: the receiver has the event.
  const thisAttempt = and(
    eq(webhookDeliveries.id, deliveryId),
    eq(webhookDeliveries.attemptCount, attemptNumber),
    eq(webhookDeliveries.status, "pending"),
    eq(webhookDeliveries.firstAttemptAt, firstAttemptAt),
  );
  // The endpoint's health (src/webhooks/health.ts): a 2xx clears its failing_since; a failure sets
  // it, and disables the endpoint once it has failed for 5 days; a 410 disables it at once. The
  // window's end without a 2xx emits webhook_delivery.exhausted. All in the attempt's batch.
  const failingTooLong = !ok && !gone && failingLongEnough(endpoint.failingSince, now);
  const disabling = gone ? disableEndpoint(db, endpoint, "gone", now) : failingTooLong ? disableEndpoint(db, endpoint, "failing", now) : null;
  const exhausted = outcome === "failed" ? deliveryExhaustedEvent(db, { ...delivery, attemptCount: attemptNumber, eventType: event.type }, firstAttemptAt, now, endedByAttempt) : null;
  const health = [
    ok ? recordSuccess(db, endpoint.id) : recordFailure(db, endpoint.id, now),
    ...(disabling ? [...disabling.statements, ...disabling.event.statements] : []),
    ...(exhausted?.statements ?? []),
  ];
  const disabledAt = disabling ? 3 : -1;
  const waiting = waitingFor(db, delivery, event);
  const healthDeliveries = [...(disabling ? [3 + disabling.statements.length + 1] : []), ...(exhausted ? [2 + health.length - 1] : [])];
  const record: Statement[] = [
    // The attempt, recorded only where its delivery still is: an account moved to another shard
    // while the request was out leaves no attempt behind on the shard it left.
    rawStatement(
      db,
      sql`INSERT INTO ${deliveryAttempts} (id, delivery_id, account_id, livemode, attempt_number, attempted_at, status_code, duration_ms, response_excerpt, error)
        SELECT ${newId("attempt", now)}, ${deliveryId}, ${delivery.accountId}, ${delivery.livemode ? 1 : 0}, ${attemptNumber}, ${isoTime(now)}, ${status}, ${durationMs}, ${responseExcerpt}, ${error}
        WHERE EXISTS (SELECT 1 FROM ${webhookDeliveries} WHERE ${webhookDeliveries.id} = ${deliveryId})
        ON CONFLICT DO NOTHING`,
    ),
    ok
      ? db
          .update(webhookDeliveries)
          .set({ status: "delivered", nextAttemptAt: null, leaseUntil: null, waitingFor: null, lastStatusCode: status, lastError: null, updatedAt: now, deliveredAt: isoTime(now) })
          .where(and(eq(webhookDeliveries.id, deliveryId), ne(webhookDeliveries.status, "delivered")))
          .returning({ id: webhookDeliveries.id })
      : db
          .update(webhookDeliveries)
          .set({
            status: outcome === "scheduled" ? "pending" : "failed",
            nextAttemptAt: next,
            leaseUntil: null,
            waitingFor: null,
            lastStatusCode: status,
            lastError: gone ? "endpoint_gone" : error,
            updatedAt: now,
          })
          .where(thisAttempt)
          .returning({ id: webhookDeliveries.id }),
    ...health,
    // An overload answer puts the endpoint on the throttled path (above) until the slowdown ends.
    // After the health statements, whose positions healthDeliveries counts.
    ...(overloaded
      ? [
          db
            .update(webhookEndpoints)
            .set({ slowedUntil: sql`max(coalesce(${webhookEndpoints.slowedUntil}, 0), ${slowedUntilAfter(now, retryAfterMs)})` })
            .where(eq(webhookEndpoints.id, endpoint.id)),
        ]
      : []),
    // Last: the deliveries waiting for this one, read after its end is written (in the same batch,
    // rather than a round trip of its own), for the wake-up below when the attempt ended it.
    ...(waiting ? [waiting] : []),
  ];
  const results = gathered ? await gathered.record.run(record) : await runBatch(db, record);
  const woken = waiting ? (results.at(-1) as { id: string }[]) : [];
  await enqueueHealthEvents(env, results, healthDeliveries);
  if (overloaded) await slowDownEndpoint(env, endpoint.id, retryAfterMs);
  // A later attempt took the delivery over (our lease ran out): it schedules what comes next. Or
  // our own record already committed (a gathered batch whose answer was lost is sent again alone,
  // src/db/gathered.ts, and finds its end written): its waiters are woken here, as nobody else
  // will before the sweeper (a still-pending delivery's waiters, woken, only wait again).
  if ((results[1] as unknown[]).length === 0) {
    if (!ok) await handBackToRedelivery(env, db, deliveryId, attemptNumber, now + DELIVERY_LEASE_MS);
    await wake(env, woken);
    return ok ? "delivered" : "skipped";
  }
  // This failure disabled the endpoint: the delivery ended with its other pending ones.
  if (disabledAt >= 0 && (results[disabledAt] as unknown[]).length > 0 && outcome === "scheduled") {
    await wake(env, woken);
    return "endpoint_disabled";
  }
  if (next !== null) await schedulerFor(env, endpoint.id).schedule(deliveryId, next, env.SHARD);
  else await wake(env, woken);
  return outcome;
}

/** Slows the endpoint in its Durable Object; a failure only loses the slowdown, never the attempt. */
async function slowDownEndpoint(env: Bindings, endpointId: string, retryAfterMs: number | null): Promise<void> {
  try {
    await schedulerFor(env, endpointId).slowDown(retryAfterMs);
  } catch (error) {
    console.error(JSON.stringify({ message: "endpoint slowdown failed", endpoint: endpointId, error: String(error) }));
  }
}

/** Queues the deliveries of the health events a batch wrote (the sweeper sends any a lost enqueue misses). */
async function enqueueHealthEvents(env: Bindings, results: unknown[], offsets: number[]): Promise<void> {
  const ids = collectDeliveryIds(results, offsets);
  if (ids.length === 0) return;
  await enqueueDeliveries(env.DELIVERY_QUEUE, ids).catch((error) => {
    console.error(JSON.stringify({ message: "enqueue of health event deliveries failed; the sweeper will send them", deliveries: ids.length, error: String(error) }));
  });
}

/**
 * Our failure was not recorded: a redelivery or a recovery gave the delivery a fresh window while
 * our attempt was in flight (its message found the delivery leased and sent nothing), or the
 * endpoint was disabled meanwhile (the delivery ended). Our lease is given back either way, so a
 * later redelivery or recovery is not held back by it; a delivery pending again is queued, so it
 * goes out now.
 */
async function handBackToRedelivery(env: Bindings, db: Db, deliveryId: string, attemptNumber: number, lease: number): Promise<void> {
  const [handed] = await db
    .update(webhookDeliveries)
    .set({ leaseUntil: null })
    .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.attemptCount, attemptNumber), eq(webhookDeliveries.leaseUntil, lease)))
    .returning({ status: webhookDeliveries.status, firstAttemptAt: webhookDeliveries.firstAttemptAt });
  if (handed?.status === "pending" && handed.firstAttemptAt === null) await enqueueDeliveries(env.DELIVERY_QUEUE, [deliveryId]);
}

/**
 * On a per_object endpoint: the pending delivery about the same object just before this one (the
 * latest earlier one, not the earliest): each waits for its own predecessor, so a delivery that
 * ends wakes only the next one, and a chain of n held deliveries takes n wake-ups, not n²/2.
 */
async function earlierPending(db: Db, endpointId: string, objectId: string, sequence: number, deliveryId: string): Promise<string | null> {
  const [row] = await db
    .select({ id: webhookDeliveries.id })
    .from(webhookDeliveries)
    .innerJoin(events, eq(events.id, webhookDeliveries.eventId))
    .where(
      and(
        eq(webhookDeliveries.endpointId, endpointId),
        eq(webhookDeliveries.status, "pending"),
        eq(events.objectId, objectId),
        lt(events.sequence, sequence),
        ne(webhookDeliveries.id, deliveryId),
      ),
    )
    .orderBy(desc(events.sequence))
    .limit(1);
  return row?.id ?? null;
}

/** How often a delivery looks again for the earlier one to wait for before it re-enqueues itself. */
const MAX_WAIT_LOOKS = 5;

/** SQL: the delivery `id` is still pending (read in the statement that records a wait for it). */
const stillPending = (id: string) =>
  sql`EXISTS (SELECT 1 FROM ${webhookDeliveries} AS earlier WHERE earlier.id = ${id} AND earlier.status = 'pending')`;

/**
 * A delivery ended (delivered, or failed): the deliveries that waited for it go out now. Only a
 * later delivery about the same object, to the same endpoint, can wait for it, so the lookup
 * starts from the object's later events (not from every pending delivery of the database).
 */
async function wakeWaiting(
  env: Bindings,
  db: Db,
  delivery: { id: string; endpointId: string },
  event: { objectId: string | null; sequence: number | null },
): Promise<void> {
  const query = waitingFor(db, delivery, event);
  if (query) await wake(env, await query);
}

/** Queues the deliveries that waited for one that ended. */
async function wake(env: Bindings, waiting: { id: string }[]): Promise<void> {
  if (waiting.length > 0) await enqueueDeliveries(env.DELIVERY_QUEUE, waiting.map((w) => w.id));
}

/** The query for the pending deliveries waiting for `delivery` (none can when its event has no object). */
function waitingFor(db: Db, delivery: { id: string; endpointId: string }, event: { objectId: string | null; sequence: number | null }) {
  if (event.objectId === null || event.sequence === null) return null;
  return db
    .select({ id: webhookDeliveries.id })
    .from(events)
    .innerJoin(webhookDeliveries, and(eq(webhookDeliveries.eventId, events.id), eq(webhookDeliveries.endpointId, delivery.endpointId)))
    .where(
      and(
        eq(events.objectId, event.objectId),
        gt(events.sequence, event.sequence),
        eq(webhookDeliveries.waitingFor, delivery.id),
        eq(webhookDeliveries.status, "pending"),
      ),
    );
}

/**
 * How long a gathered record waits for the queue batch's other attempts still out (a slow
 * receiver): the record of an attempt that has its answer is held back this long at most.
 */
export const RECORD_GATHER_MS = 20;

export async function handleDeliveryBatch(batch: MessageBatch<DeliveryMessage>, env: RuntimeBindings, recordGatherMs = RECORD_GATHER_MS): Promise<void> {
  // One read per shard for the whole batch (loadDeliveries), started once its messages are known;
  // a message whose read fails is retried by the queue like any other failure. The claims of a
  // shard's messages then go to D1 in one batch, and so do their records (src/db/gathered.ts):
  // each message holds a ticket to both until it ends.
  const byShard = new Map<
    number,
    { env: Bindings; ids: string[]; rows?: Promise<Map<string, NonNullable<LoadedDelivery>>>; claims: ReturnType<typeof gatherBatches>; records: ReturnType<typeof gatherBatches> }
  >();
  const envOf = (message: Message<DeliveryMessage>) => {
    // A message names its shard (src/db/shards.ts); an unbound shard throws, and the queue retries.
    const shardEnv = messageEnv(env, message.body);
    let group = byShard.get(shardEnv.SHARD);
    if (!group) {
      const db = createDb(shardEnv.DB);
      // Claims: those the batch's messages reach together (the next macrotask at the latest).
      byShard.set(shardEnv.SHARD, (group = { env: shardEnv, ids: [], claims: gatherBatches(db, 0), records: gatherBatches(db, recordGatherMs) }));
    }
    group.ids.push(message.body.deliveryId);
    return { group, gathered: { claim: group.claims.ticket(), record: group.records.ticket() } };
  };
  const groups = batch.messages.map((message) => {
    try {
      return envOf(message);
    } catch (error) {
      return error as Error;
    }
  });
  await Promise.all(
    batch.messages.map(async (message, i) => {
      const entry = groups[i];
      try {
        if (entry instanceof Error) throw entry;
        const { group, gathered } = entry;
        group.rows ??= loadDeliveries(createDb(group.env.DB), group.ids);
        const rows = await group.rows;
        await processDelivery(group.env, message.body.deliveryId, randomUnit, rows.get(message.body.deliveryId) ?? null, gathered);
        message.ack();
      } catch (error) {
        console.error(JSON.stringify({ message: "delivery processing failed; the queue will retry", delivery: message.body?.deliveryId, error: String(error) }));
        message.retry({ delaySeconds: Math.min(60, 2 ** message.attempts) });
      } finally {
        if (!(entry instanceof Error)) {
          entry.gathered.claim.leave();
          entry.gathered.record.leave();
        }
      }
    }),
  );
}
