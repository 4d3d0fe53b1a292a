// The transactional outbox. An event row, and one delivery row per matching active endpoint,
// join the same D1 batch as the state change that caused them. After the batch commits, the new
// delivery ids are enqueued; the sweeper (src/webhooks/sweeper.ts) re-enqueues any that the
// enqueue missed, so no event is lost between the commit and the queue. An event belongs to the
// account and mode of the change that caused it, and reaches only endpoints of that account AND
// mode: a test event never goes to a live endpoint, nor a live event to a test one.
import { type SQL, and, eq, isNotNull, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { type FailureMap, rawStatement, runBatch, type Statement } from "../db/batch";
import { preparedRaw, preparedRawBy } from "../db/prepared";
import { type Tenant, livemodeJsonSql, ownedBy } from "../db/scope";
import { events, subscriptions, webhookDeliveries, webhookEndpoints } from "../db/schema";
import { subscriptionAnswer } from "../billing/subscription-answer";
import { newId } from "../domain/ids";
import { isoTime } from "../lib/clock";
import { ALL_EVENTS, type EnvelopeEventType, type NotificationEventType, TEST_EVENT_TYPE } from "./catalog";
import { sendInBatches } from "../lib/queue";

export type EventSpec =
  | { type: EnvelopeEventType; data: unknown; objectId?: string }
  /** An envelope whose data is read in the batch from a registered source (eventDataSource), about `objectId`. */
  | { type: EnvelopeEventType; source: string; objectId: string }
  /** A subscription notification; its status may be read in the batch (SQL); its data is the subscription as committed. */
  | { type: NotificationEventType; subscriptionId: string; status: string | SQL }
  /** An envelope whose data is read in the batch (the row as committed), about `objectId`. */
  | { type: EnvelopeEventType; dataSql: SQL; objectId: string };

/**
 * An event as written by its batch: its own statements, or a `row` of the statement that writes
 * a run of events together (`eventRowsInsert`: an event whose data is JSON, a registered source's,
 * or a subscription notification with its status known); and where its deliveries are made,
 * exactly one of
 * - `fanOutAt` (the event's time, ms): by the one statement commitWrites adds to the batch for every
 *   such event, a delivery per subscribed endpoint (`fanOutDeliveries`);
 * - `deliveriesAt`: by its own delivery insert, at that index within `statements`, whose RETURNING
 *   rows are enqueued (a test event to one endpoint, a redelivery).
 * Events are committed by commitWrites only: their statements alone make no delivery.
 */
export type EmittedEvent = { id: string; statements: Statement[]; row?: EventRow } & (
  | { fanOutAt: number; deliveriesAt?: never }
  | { deliveriesAt: number; fanOutAt?: never }
);

/** An event written with others by one statement: its columns, and where its data comes from. */
export interface EventRow {
  id: string;
  account_id: string;
  livemode: 0 | 1;
  type: string;
  object_id: string;
  created_at: string;
  /** `json` (the data is `data`), `subscription` (a notification with `status`), or a registered source's name. */
  source: string;
  data?: string;
  status?: string;
}

/**
 * The object an event is about: the subscription of a notification, else the `objectId` given,
 * else the id in its data (`id`, or a payment event's `transaction_id`).
 */
export function objectIdOf(spec: EventSpec): string | null {
  if ("subscriptionId" in spec) return spec.subscriptionId;
  if (spec.objectId) return spec.objectId;
  const data = "data" in spec ? (spec.data as { id?: unknown; transaction_id?: unknown } | null) : null;
  if (typeof data?.id === "string") return data.id;
  if (typeof data?.transaction_id === "string") return data.transaction_id;
  return null;
}

/** A placeholder of a prepared statement (src/db/prepared.ts), as SQL. */
const p = (name: string) => sql`${sql.placeholder(name)}`;

/** SQL: the next place among the object's events, read by the INSERT that takes it. */
const nextSequence = (objectId: SQL | string) => sql`(SELECT COALESCE(MAX(sequence), 0) + 1 FROM ${events} WHERE object_id = ${objectId})`;

/**
 * The body delivered for an event, built in the batch that writes it: the envelope
 * `{ id, type, data, created_at, object_id, sequence }`. A subscription notification also keeps
 * the interface document's fields at the top level (`event` repeating `type`, `subscription_id`,
 * `status`, `timestamp`), and its `data` is the subscription as the API returns it: stored here as
 * the row the batch committed, and serialized by the subscription's one serializer when the body
 * is read (src/webhooks/payload.ts).
 */
function eventPayload(id: string, spec: Exclude<EventSpec, { source: string }>, at: number, objectId: string | null, sequence: SQL | null, livemode: boolean): SQL {
  const mode = livemodeJsonSql(sql.raw(livemode ? "1" : "0"));
  if ("subscriptionId" in spec) {
    const data = subscriptionData(spec.subscriptionId);
    return sql`json_object('id', ${id}, 'type', ${spec.type}, 'data', ${data}, 'created_at', ${isoTime(at)}, 'object_id', ${objectId}, 'sequence', ${sequence ?? sql`NULL`}, 'livemode', ${mode},
      'event', ${spec.type}, 'subscription_id', ${spec.subscriptionId}, 'status', ${spec.status}, 'timestamp', ${isoTime(at)})`;
  }
  const data = "dataSql" in spec ? sql`json(${spec.dataSql})` : sql`json(${JSON.stringify(spec.data ?? null)})`;
  return envelopeSql(id, spec.type, data, isoTime(at), objectId, sequence, mode);
}

/** A subscription notification's data: the subscription as committed, stored for its one serializer. */
const subscriptionData = (subscriptionId: SQL | string) => sql`json(${subscriptionAnswer.stored(eq(subscriptions.id, subscriptionId))})`;

// Sources of event data read in the batch, by name: SQL over the object's id. Registered by the
// modules that own the objects when they load (an invoice at each stage: src/billing/invoices.ts),
// before any batch writes an event: the statement that writes runs of events knows them all.
const dataSources = new Map<string, (objectId: SQL) => SQL>();
let sourcesSealed = false;

/** Registers a source of event data (at module load); returns its name, for EventSpec's `source`. */
export function eventDataSource(name: string, read: (objectId: SQL) => SQL): string {
  if (!/^[a-z_.:]+$/.test(name) || name === "json" || name === "subscription") throw new Error(`bad event data source name ${name}`);
  if (sourcesSealed) throw new Error(`event data source ${name} registered after events were written`);
  dataSources.set(name, read);
  return name;
}

function sourceData(name: string, objectId: SQL): SQL {
  const read = dataSources.get(name);
  if (!read) throw new Error(`unknown event data source ${name}`);
  return sql`json(${read(objectId)})`;
}

/** The envelope, as SQL: `data` is JSON; `livemode` the event's mode, as Stripe's envelope carries it. */
const envelopeSql = (id: SQL | string, type: SQL | string, data: SQL, createdAt: SQL | string, objectId: SQL | string | null, sequence: SQL | null, livemode: SQL) =>
  sql`json_object('id', ${id}, 'type', ${type}, 'data', ${data}, 'created_at', ${createdAt}, 'object_id', ${objectId}, 'sequence', ${sequence ?? sql`NULL`}, 'livemode', ${livemode})`;

/**
 * A delivery's id is derived from its event and endpoint (`dlv_` + both ids' time-ordered parts),
 * so the same pair always names the same delivery. The SQL form builds it inside an INSERT.
 */
export const deliveryIdOf = (eventId: string, endpointId: string) => `dlv_${eventId.slice(4)}${endpointId.slice(4)}`;
export const deliveryIdSql = (eventId: SQL, endpointId: SQL) => sql`'dlv_' || substr(${eventId}, 5) || substr(${endpointId}, 5)`;

/**
 * The deliveries of the new events of a batch (`events`: a JSON array of `{ id, at }`, `at` each
 * event's time in ms): one per active endpoint of the event's account and mode subscribed to its
 * type. One statement for every event of the batch however many there are (a renewal chunk's
 * settlements emit five each), so an event costs its own insert only. Prepared once per isolate.
 */
const preparedFanOut = preparedRaw(() => sql`
    INSERT INTO ${webhookDeliveries} (id, account_id, livemode, event_id, endpoint_id, status, attempt_count, created_at, updated_at)
    SELECT ${deliveryIdSql(sql`ev.id`, sql`e.id`)}, ev.account_id, ev.livemode, ev.id, e.id, 'pending', 0, ev.created_at, json_extract(emitted.value, '$.at')
    FROM json_each(${p("events")}) AS emitted
    JOIN ${events} ev ON ev.id = json_extract(emitted.value, '$.id')
    JOIN ${webhookEndpoints} e ON e.account_id = ev.account_id AND e.livemode = ev.livemode
    WHERE e.status = 'active' AND e.deleted_at IS NULL
      AND EXISTS (SELECT 1 FROM json_each(e.events) WHERE value IN (ev.type, ${ALL_EVENTS}))
    ON CONFLICT (event_id, endpoint_id) DO NOTHING
    RETURNING id`);

const fanOutDeliveries = (db: Db, emitted: { id: string; at: number }[]): Statement =>
  preparedFanOut(db).with({ events: JSON.stringify(emitted) });

/**
 * The deliveries of a new event to the one endpoint named (if it is of the event's account and
 * mode). Prepared once per isolate.
 */
const preparedEndpointDelivery = preparedRaw(() => sql`
    INSERT INTO ${webhookDeliveries} (id, account_id, livemode, event_id, endpoint_id, status, attempt_count, created_at, updated_at)
    SELECT ${deliveryIdSql(p("eventId"), sql`e.id`)}, ${p("accountId")}, ${p("livemode")}, ${p("eventId")}, e.id, 'pending', 0, ${p("createdAt")}, ${p("at")}
    FROM ${webhookEndpoints} e
    WHERE e.account_id = ${p("accountId")} AND e.livemode = ${p("livemode")} AND e.status = 'active' AND e.deleted_at IS NULL
      AND e.id = ${p("endpointId")}
    ON CONFLICT (event_id, endpoint_id) DO NOTHING
    RETURNING id`);

/**
 * A redelivery of an event, RETURNING the ids of the deliveries it queued. To the endpoint named:
 * whatever the state of the event's delivery there (a new one, or the existing one back to pending
 * now, with a fresh 24-hour window). Without one, only where the event was not delivered: a failed
 * delivery to an active endpoint still subscribed to its type is sent again, and such an endpoint
 * that never had one gets one (never the endpoint a health event is about); a delivered delivery,
 * or one still being tried, is left as it is.
 * Of the event's account and mode either way. Its attempt count carries on, so attempt numbers stay unique.
 */
export function redeliveriesFor(db: Db, tenant: Tenant, eventId: string, at: number, endpointId?: string): Statement {
  const targets = endpointId
    ? sql`e.id = ${endpointId}`
    : sql`EXISTS (SELECT 1 FROM json_each(e.events) WHERE value IN (ev.type, ${ALL_EVENTS}))
        AND NOT EXISTS (SELECT 1 FROM ${webhookDeliveries} d WHERE d.event_id = ev.id AND d.endpoint_id = e.id AND d.status <> 'failed')
        AND (ev.object_id IS NULL OR ev.object_id <> e.id)`;
  return rawStatement(db, sql`
    INSERT INTO ${webhookDeliveries} (id, account_id, livemode, event_id, endpoint_id, status, attempt_count, created_at, updated_at)
    SELECT ${deliveryIdSql(sql`ev.id`, sql`e.id`)}, ev.account_id, ev.livemode, ev.id, e.id, 'pending', 0, ${isoTime(at)}, ${at}
    FROM ${events} ev JOIN ${webhookEndpoints} e ON e.account_id = ev.account_id AND e.livemode = ev.livemode
    WHERE ev.id = ${eventId} AND ev.account_id = ${tenant.accountId} AND ev.livemode = ${tenant.livemode ? 1 : 0}
      AND e.status = 'active' AND e.deleted_at IS NULL AND ${targets}
    ON CONFLICT (event_id, endpoint_id) DO UPDATE SET status = 'pending', first_attempt_at = NULL, next_attempt_at = NULL, waiting_for = NULL, updated_at = ${at}
    RETURNING id`);
}

/**
 * SQL, run in the redelivery's batch after it: the answer `{ object: "redelivery", event_id,
 * deliveries, skipped }`. `deliveries` are the ids queued (set back to pending, untried, by this
 * batch: updated at `at`); `skipped`, every other delivery of the event (of the endpoint named,
 * if one was), with why it was left alone: already_delivered, in_progress (pending: it is being
 * tried), endpoint_disabled (disabled or deleted) or endpoint_unsubscribed (failed, and its
 * endpoint no longer takes the type). Both in id order. The live answer and the stored one are
 * this same SQL.
 */
export function redeliveryAnswerSql(tenant: Tenant, eventId: string, at: number, endpointId?: string): SQL {
  const ofEvent = sql`d.event_id = ${eventId} AND d.account_id = ${tenant.accountId} AND d.livemode = ${tenant.livemode ? 1 : 0}${endpointId ? sql` AND d.endpoint_id = ${endpointId}` : sql``}`;
  const queued = sql`(d.status = 'pending' AND d.first_attempt_at IS NULL AND d.waiting_for IS NULL AND d.updated_at = ${at})`;
  const reason = sql`CASE WHEN d.status = 'delivered' THEN 'already_delivered' WHEN d.status = 'pending' THEN 'in_progress'
    WHEN e.status <> 'active' OR e.deleted_at IS NOT NULL THEN 'endpoint_disabled' ELSE 'endpoint_unsubscribed' END`;
  return sql`json_object('object', 'redelivery', 'livemode', ${livemodeJsonSql(sql.raw(tenant.livemode ? "1" : "0"))}, 'event_id', ${eventId},
    'deliveries', (SELECT json_group_array(id) FROM (SELECT d.id FROM ${webhookDeliveries} d WHERE ${ofEvent} AND ${queued} ORDER BY d.id)),
    'skipped', (SELECT json_group_array(json(item)) FROM (
      SELECT json_object('delivery_id', d.id, 'endpoint_id', d.endpoint_id, 'reason', ${reason}) AS item
      FROM ${webhookDeliveries} d JOIN ${webhookEndpoints} e ON e.id = d.endpoint_id
      WHERE ${ofEvent} AND NOT ${queued} ORDER BY d.id)))`;
}

/**
 * SQL: the event's place in its account's feed, read by the INSERT that takes it. D1 runs one
 * write at a time, so places are taken in commit order: an event that commits after another
 * comes after it in the feed, whatever time its id carries (src/routes/events/feed.ts).
 */
const nextFeedPosition = (accountId: SQL | string) => sql`(SELECT COALESCE(MAX(feed_position), 0) + 1 FROM ${events} WHERE account_id = ${accountId})`;

const eventInsert = (id: SQL | string, accountId: SQL | string, livemode: SQL | number, type: SQL | string, payload: SQL, objectId: SQL | string | null, sequence: SQL | null, createdAt: SQL | string) =>
  sql`INSERT INTO ${events} (id, account_id, livemode, type, payload, object_id, sequence, feed_position, created_at)
    VALUES (${id}, ${accountId}, ${livemode}, ${type}, ${payload}, ${objectId}, ${sequence ?? sql`NULL`}, ${nextFeedPosition(accountId)}, ${createdAt})`;

/** An event of `tenant` (the caller, or the row the change is about: its account and mode). */
export function emitEvent(db: Db, tenant: Tenant, spec: EventSpec, at: number): EmittedEvent {
  const id = newId("event", at);
  const { accountId } = tenant;
  const livemode = tenant.livemode ? 1 : 0;
  const objectId = objectIdOf(spec);
  const createdAt = isoTime(at);
  // Written with the batch's other events, by one statement, when its data can be read there.
  const row = (source: string, extra: Pick<EventRow, "data" | "status">): EmittedEvent => ({
    id,
    statements: [],
    row: { id, account_id: accountId, livemode, type: spec.type, object_id: objectId as string, created_at: createdAt, source, ...extra },
    fanOutAt: at,
  });
  if ("source" in spec) {
    if (!dataSources.has(spec.source)) throw new Error(`unknown event data source ${spec.source}`);
    return row(spec.source, {});
  }
  if ("data" in spec && objectId !== null) return row("json", { data: JSON.stringify(spec.data ?? null) });
  if ("subscriptionId" in spec && typeof spec.status === "string") return row("subscription", { status: spec.status });
  const sequence = objectId === null ? null : nextSequence(objectId);
  const insert = rawStatement(db, eventInsert(id, accountId, livemode, spec.type, eventPayload(id, spec, at, objectId, sequence, tenant.livemode), objectId, sequence, createdAt));
  return { id, statements: [insert], fanOutAt: at };
}

/**
 * The statement that writes a run of events (`rows`: a JSON array of EventRow), in their order:
 * each takes the next place among its object's events and in its account's feed (the MAX before
 * the statement plus its rank within it: SQLite reads the whole SELECT before it inserts, as it
 * reads the table it inserts into), and its payload is built as each event's own insert builds it.
 * Prepared once per isolate for each set of data sources a run reads (`sources`: their names,
 * sorted and joined by commas): its SQL holds only their branches. With every registered source's,
 * it was some 14,000 characters, sent to D1 and parsed there with every write that emits an event.
 */
const preparedEventRows = preparedRawBy((sources: string) => {
  sourcesSealed = true;
  const read = sources.split(",");
  const column = (name: keyof EventRow) => sql.raw(`json_extract(j.value, '$.${name}') AS ${name}`);
  const objectId = sql.raw("r.object_id");
  const branches = read.filter((name) => dataSources.has(name)).map((name) => sql`WHEN ${sql.raw(`'${name}'`)} THEN ${sourceData(name, objectId)}`);
  const data = sql`CASE r.source WHEN 'json' THEN json(r.data) ${sql.join(branches, sql` `)} END`;
  const mode = livemodeJsonSql(sql.raw("r.livemode"));
  const envelope = envelopeSql(sql.raw("r.id"), sql.raw("r.type"), data, sql.raw("r.created_at"), objectId, sql.raw("r.seq"), mode);
  const payload = read.includes("subscription")
    ? sql`CASE WHEN r.source = 'subscription'
        THEN json_object('id', r.id, 'type', r.type, 'data', ${subscriptionData(objectId)}, 'created_at', r.created_at, 'object_id', r.object_id, 'sequence', r.seq, 'livemode', ${mode},
          'event', r.type, 'subscription_id', r.object_id, 'status', r.status, 'timestamp', r.created_at)
        ELSE ${envelope}
      END`
    : envelope;
  return sql`
    INSERT INTO ${events} (id, account_id, livemode, type, payload, object_id, sequence, feed_position, created_at)
    SELECT r.id, r.account_id, r.livemode, r.type,
      ${payload},
      r.object_id, r.seq, r.feed, r.created_at
    FROM (
      SELECT x.*,
        (SELECT COALESCE(MAX(o.sequence), 0) FROM ${events} AS o WHERE o.object_id = x.object_id) + ROW_NUMBER() OVER (PARTITION BY x.object_id ORDER BY x.k) AS seq,
        (SELECT COALESCE(MAX(a.feed_position), 0) FROM ${events} AS a WHERE a.account_id = x.account_id) + ROW_NUMBER() OVER (PARTITION BY x.account_id ORDER BY x.k) AS feed
      FROM (SELECT j.key AS k, ${sql.join(
        (["id", "account_id", "livemode", "type", "object_id", "created_at", "source", "data", "status"] as const).map(column),
        sql`, `,
      )} FROM json_each(${p("rows")}) AS j) AS x
    ) AS r
    ORDER BY r.k`;
});

/** The statement of a run: its rows as a JSON array (each row's JSON text, as encoded), and the data sources they read. */
const eventRowsInsert = (db: Db, rows: string[], sources: Set<string>): Statement =>
  preparedEventRows(db, [...sources].sort().join(",")).with({ rows: `[${rows.join(",")}]` });

/**
 * Characters of encoded rows one run takes (a longer run is split): D1 takes a bound string of at
 * most 2,000,000 bytes, and a character takes at most 3 bytes in UTF-8. (Local D1 has no such
 * limit; an event's data is also bounded by the request fields it comes from.)
 */
export const MAX_RUN_CHARS = 600_000;

/**
 * An event written only if `when` holds as its batch runs (read by its own INSERT … SELECT, so a
 * batch that lost a race writes nothing), with `data` read there too: the endpoint health events
 * (src/webhooks/health.ts). Delivered by its own insert, as any event is, to the active endpoints
 * of its account and mode that take its type, but never to `except` (the endpoint it is about).
 */
export function emitEventWhen(
  db: Db,
  tenant: Tenant,
  spec: { type: EnvelopeEventType; dataSql: SQL; objectId: string; except: string },
  at: number,
  when: SQL,
): EmittedEvent {
  const id = newId("event", at);
  const livemode = tenant.livemode ? 1 : 0;
  const sequence = nextSequence(spec.objectId);
  const payload = envelopeSql(id, spec.type, sql`json(${spec.dataSql})`, isoTime(at), spec.objectId, sequence, livemodeJsonSql(sql.raw(String(livemode))));
  const insert = rawStatement(db, sql`INSERT INTO ${events} (id, account_id, livemode, type, payload, object_id, sequence, feed_position, created_at)
    SELECT ${id}, ${tenant.accountId}, ${livemode}, ${spec.type}, ${payload}, ${spec.objectId}, ${sequence}, ${nextFeedPosition(tenant.accountId)}, ${isoTime(at)}
    WHERE ${when}`);
  const deliveries = rawStatement(db, sql`
    INSERT INTO ${webhookDeliveries} (id, account_id, livemode, event_id, endpoint_id, status, attempt_count, created_at, updated_at)
    SELECT ${deliveryIdSql(sql`ev.id`, sql`e.id`)}, ev.account_id, ev.livemode, ev.id, e.id, 'pending', 0, ev.created_at, ${at}
    FROM ${events} ev JOIN ${webhookEndpoints} e ON e.account_id = ev.account_id AND e.livemode = ev.livemode
    WHERE ev.id = ${id} AND e.status = 'active' AND e.deleted_at IS NULL AND e.id <> ${spec.except}
      AND EXISTS (SELECT 1 FROM json_each(e.events) WHERE value IN (ev.type, ${ALL_EVENTS}))
    ON CONFLICT (event_id, endpoint_id) DO NOTHING
    RETURNING id`);
  return { id, statements: [insert, deliveries], deliveriesAt: 1 };
}

/** A `webhook.test` event, about no object, delivered to the one endpoint named only. */
export function emitTestEvent(db: Db, tenant: Tenant, endpointId: string, at: number): EmittedEvent {
  const id = newId("event", at);
  const data = { endpoint_id: endpointId, message: "A test event from Tender." };
  const payload = envelopeSql(id, TEST_EVENT_TYPE, sql`json(${JSON.stringify(data)})`, isoTime(at), null, null, livemodeJsonSql(sql.raw(tenant.livemode ? "1" : "0")));
  const insert = rawStatement(db, eventInsert(id, tenant.accountId, tenant.livemode ? 1 : 0, TEST_EVENT_TYPE, payload, null, null, isoTime(at)));
  const deliveries = preparedEndpointDelivery(db).with({ eventId: id, accountId: tenant.accountId, livemode: tenant.livemode ? 1 : 0, createdAt: isoTime(at), at, endpointId });
  return { id, statements: [insert, deliveries], deliveriesAt: 1 };
}

export interface DeliveryMessage {
  deliveryId: string;
}

export async function enqueueDeliveries(queue: Queue, deliveryIds: string[]): Promise<void> {
  await sendInBatches(queue, deliveryIds.map((deliveryId) => ({ body: { deliveryId } satisfies DeliveryMessage })));
}

/**
 * An endpoint's ordering was turned off: the deliveries it held back (`waiting_for`) go out now,
 * rather than at the sweeper's next run. A lost enqueue is not lost work: the sweeper re-enqueues
 * pending deliveries.
 */
export async function releaseHeldDeliveries(db: Db, queue: Queue, tenant: Tenant, endpointId: string): Promise<void> {
  const released = await db
    .update(webhookDeliveries)
    .set({ waitingFor: null })
    .where(
      and(ownedBy(webhookDeliveries, tenant), eq(webhookDeliveries.endpointId, endpointId), eq(webhookDeliveries.status, "pending"), isNotNull(webhookDeliveries.waitingFor)),
    )
    .returning({ id: webhookDeliveries.id });
  if (released.length === 0) return;
  await enqueueDeliveries(queue, released.map((r) => r.id)).catch((error) => {
    console.error(JSON.stringify({ message: "release of held deliveries failed to enqueue; the sweeper will send them", endpoint: endpointId, error: String(error) }));
  });
}

/** The delivery ids returned by the delivery inserts at `offsets` of a batch result. */
export function collectDeliveryIds(results: unknown[], offsets: number[]): string[] {
  const ids: string[] = [];
  for (const index of offsets) {
    const rows = (results[index] as { results?: { id: string }[] } | undefined)?.results ?? [];
    for (const row of rows) ids.push(row.id);
  }
  return ids;
}

export interface WriteSet {
  statements: Statement[];
  /**
   * The statement whose rows the caller wants back (an UPDATE … RETURNING, or a SELECT of the row
   * just written): it runs after `statements`, and its rows come back as `returned`.
   */
  returning?: Statement;
  events?: EmittedEvent[];
  /** A read that runs after the events (it sees their rows); its rows come back as `answered`. */
  answer?: Statement;
  /** Statements that must run last, such as completing the idempotency record. */
  trailing?: Statement[];
}

/**
 * Commits a write set as one D1 batch, then enqueues the deliveries it created. A failed enqueue
 * is logged, not thrown: the rows are committed and the sweeper will send them.
 * Returns the rows of `returning` and of `answer`, and the delivery ids it created.
 */
export async function commitWrites(
  deps: { db: Db; queue: Queue; waitUntil?: (promise: Promise<unknown>) => void },
  writes: WriteSet,
  failures: FailureMap = {},
): Promise<CommittedWrites> {
  const all = [...writes.statements];
  const returningAt = writes.returning ? all.push(writes.returning) - 1 : -1;
  const offsets: number[] = [];
  const fanOut: { id: string; at: number }[] = [];
  // Consecutive events written as rows share one statement; an event with its own statements
  // ends the run, so every event keeps its place in the batch's order.
  let run: string[] = [];
  let runSources = new Set<string>();
  let runChars = 0;
  const endRun = () => {
    if (run.length > 0) all.push(eventRowsInsert(deps.db, run, runSources));
    run = [];
    runSources = new Set();
    runChars = 0;
  };
  for (const event of writes.events ?? []) {
    if (event.fanOutAt !== undefined) fanOut.push({ id: event.id, at: event.fanOutAt });
    if (event.row) {
      const encoded = JSON.stringify(event.row);
      if (runChars + encoded.length + 1 > MAX_RUN_CHARS) endRun();
      run.push(encoded);
      runSources.add(event.row.source);
      runChars += encoded.length + 1;
      continue;
    }
    endRun();
    if (event.deliveriesAt !== undefined) offsets.push(all.length + event.deliveriesAt);
    all.push(...event.statements);
  }
  endRun();
  if (fanOut.length > 0) offsets.push(all.push(fanOutDeliveries(deps.db, fanOut)) - 1);
  const answerAt = writes.answer ? all.push(writes.answer) - 1 : -1;
  all.push(...(writes.trailing ?? []));
  const results = await runBatch(deps.db, all, failures);
  const deliveryIds = collectDeliveryIds(results, offsets);
  if (deliveryIds.length > 0) {
    const send = enqueueDeliveries(deps.queue, deliveryIds).catch((error) => {
      console.error(JSON.stringify({ message: "enqueue failed; the sweeper will retry", deliveries: deliveryIds.length, error: String(error) }));
    });
    if (deps.waitUntil) deps.waitUntil(send);
    else await send;
  }
  const rowsAt = (at: number) => (at >= 0 ? (results[at] as unknown[]) : []);
  return { returned: rowsAt(returningAt), answered: rowsAt(answerAt), deliveryIds };
}

export interface CommittedWrites {
  /** The rows of `returning`. */
  returned: unknown[];
  /** The rows of `answer`. */
  answered: unknown[];
  /** The deliveries the batch created (and enqueued). */
  deliveryIds: string[];
}
