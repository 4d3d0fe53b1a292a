// POST /api/webhooks/{id}/recover: every event of [since, until) the endpoint takes and has no 2xx
// for is sent once more by a job on the real job queue, oldest first, in the endpoint's order when it
// is per_object; a duplicate message or the endpoint's own retries never send or record one twice;
// an overlapping recovery still running answers 409; bad ranges 400; another tenant's ids 404.
import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { env } from "../support/env";
import { type Account, call, fetchWith, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { droppingQueue, runCron } from "../support/queue";
import { waitFor } from "../support/wait";
import { recoverPage, runRecovery } from "../../src/webhooks/operations/recovery";
import { schedulerFor } from "../../src/webhooks/scheduler";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const deliveryOf = (eventId: string, endpointId: string) => `dlv_${eventId.slice(4)}${endpointId.slice(4)}`;
const iso = (ms: number) => new Date(ms).toISOString();

async function register(acct: Account, path: string, options: { events?: string[]; ordering?: string } = {}) {
  const res = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}${path}`, events: options.events ?? ["customer.created"], ...(options.ordering ? { ordering: options.ordering } : {}) } });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}

/** The account's events, oldest first in the feed. */
async function eventIds(acct: Account): Promise<string[]> {
  const res = await call("/api/events?limit=100", { key: acct.key });
  return (res.body.data as { id: string }[]).map((e) => e.id).reverse();
}

/** Waits until the event's delivery to the endpoint has been tried at least once (and failed). */
async function triedOnce(eventId: string, endpointId: string) {
  await waitFor(async () => {
    const row = await env.DB.prepare("SELECT attempt_count, status FROM webhook_deliveries WHERE id = ?").bind(deliveryOf(eventId, endpointId)).first<{ attempt_count: number }>();
    expect(row?.attempt_count ?? 0).toBeGreaterThanOrEqual(1);
  }, 8000, 25);
}

/** The 24-hour windows of these deliveries ended without a 2xx: they are failed. */
async function gaveUp(deliveryIds: string[]) {
  for (const id of deliveryIds) {
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, waiting_for = NULL, lease_until = NULL, last_error = 'retry_window_ended' WHERE id = ?").bind(id).run();
  }
}

const recover = (acct: Account, endpointId: string, body: object, key = acct.key) => call(`/api/webhooks/${endpointId}/recover`, { key, body });
/** The recovery asked for with its job left unstarted (its message lost), so the test drives it. */
const recoverHeld = (acct: Account, endpointId: string, body: object) =>
  fetchWith({ JOB_QUEUE: droppingQueue() }, `/api/webhooks/${endpointId}/recover`, { key: acct.key, json: body });

const readRecovery = async (acct: Account, endpointId: string, id: string) => {
  const res = await call(`/api/webhooks/${endpointId}/recoveries/${id}`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return res.body;
};
const waitDone = (acct: Account, endpointId: string, id: string) =>
  waitFor(async () => {
    const body = await readRecovery(acct, endpointId, id);
    expect(body.status).toBe("done");
    return body;
  }, 10_000, 50);

/** The receiver's requests to `path` since `from`, as their webhook-ids. */
const receivedAt = (path: string, from = 0) => receiver.received.slice(from).filter((r) => r.url === `${RECEIVER_ORIGIN}${path}`).map((r) => r.headers["webhook-id"]);

describe("a recovery sends what the endpoint missed, once", () => {
  it("a receiver that failed and came back gets each missed event once, and the endpoint's own retries racing it send and record nothing twice", async () => {
    const acct = await signup();
    const since = iso(Date.now() - 1000);
    const endpoint = await register(acct, "/down");
    receiver.answer(500);
    for (const name of ["Ada One", "Bob Two", "Cy Three"]) await createUser(acct, { name });
    const events = await eventIds(acct);
    expect(events).toHaveLength(3);
    for (const id of events) await triedOnce(id, endpoint);
    // Two of them are still being retried (a retry is scheduled), the oldest gave up.
    await gaveUp([deliveryOf(events[0], endpoint)]);

    receiver.answer(200);
    const before = receiver.received.length;
    const res = await recover(acct, endpoint, { since });
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({ object: "webhook_recovery", livemode: false, endpoint_id: endpoint, since, status: "running", total: 0, sent: 0, completed_at: null });
    expect(res.body.id).toMatch(/^rcv_/);
    expect(Date.parse(res.body.until)).toBeLessThanOrEqual(Date.now());

    const done = await waitDone(acct, endpoint, res.body.id);
    expect(done).toMatchObject({ total: 3, sent: 3 });
    expect(done.completed_at).not.toBeNull();
    await waitFor(async () => {
      const rows = await env.DB.prepare(`SELECT status FROM webhook_deliveries WHERE endpoint_id = ?`).bind(endpoint).all<{ status: string }>();
      expect(rows.results.map((r) => r.status)).toEqual(["delivered", "delivered", "delivered"]);
    }, 8000, 25);
    // The endpoint's own retries fall due now: they find the deliveries delivered and send nothing.
    await runDurableObjectAlarm(schedulerFor(env, endpoint));
    await sleep(300);
    expect(receivedAt("/down", before).sort()).toEqual([...events].sort());
    // Each delivery has its failed attempt and one 2xx: numbered 1 and 2, never recorded twice.
    const attempts = await env.DB.prepare(
      "SELECT d.event_id, a.attempt_number, a.status_code FROM delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ? ORDER BY d.event_id, a.attempt_number",
    )
      .bind(endpoint)
      .all<{ event_id: string; attempt_number: number; status_code: number }>();
    for (const id of events) {
      const own = attempts.results.filter((a) => a.event_id === id);
      expect(own.filter((a) => a.status_code === 200), id).toHaveLength(1);
      expect(new Set(own.map((a) => a.attempt_number)).size).toBe(own.length);
    }
  });

  it("goes through the range oldest first, a page at a time, and leaves events delivered with a 2xx and events outside the range alone", async () => {
    const acct = await signup();
    const endpoint = await register(acct, "/range");
    receiver.answer(500);
    await createUser(acct, { name: "Before Range" });
    await sleep(20);
    const since = iso(Date.now());
    const users = [];
    for (const name of ["In One", "In Two", "In Three", "In Ok"]) users.push(await createUser(acct, { name }));
    // customer.updated: in the range, but not a type the endpoint takes.
    const renamed = await call(`/api/users/${users[0].id}`, { key: acct.key, method: "PUT", body: { name: "In One Renamed", email: users[0].email } });
    expect(renamed.status, renamed.text).toBe(200);
    await sleep(20);
    const until = iso(Date.now());
    await sleep(20);
    await createUser(acct, { name: "After Range" });
    const [outBefore, in1, in2, in3, inOk, , outAfter] = await eventIds(acct);
    for (const id of [outBefore, in1, in2, in3, inOk, outAfter]) await triedOnce(id, endpoint);
    await gaveUp([outBefore, in1, in2, in3, outAfter].map((id) => deliveryOf(id, endpoint)));
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'delivered', next_attempt_at = NULL, delivered_at = ? WHERE id = ?").bind(iso(Date.now()), deliveryOf(inOk, endpoint)).run();

    receiver.answer(200);
    const before = receiver.received.length;
    const res = await recoverHeld(acct, endpoint, { since, until });
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({ since, until, status: "running" });
    const statusOf = async (id: string) => (await env.DB.prepare("SELECT status FROM webhook_deliveries WHERE id = ?").bind(deliveryOf(id, endpoint)).first<{ status: string }>())!.status;

    // Pages of two, oldest first: the first page queues the two oldest missed events only.
    expect(await recoverPage(env, res.body.id, 2)).toEqual({ more: true });
    await waitFor(async () => expect(receivedAt("/range", before)).toEqual(expect.arrayContaining([in1, in2])), 8000, 25);
    expect(await statusOf(in3)).toBe("failed");
    expect(await readRecovery(acct, endpoint, res.body.id)).toMatchObject({ status: "running", total: 2, sent: 2 });
    // The second page: the third missed event, and the delivered one looked at and left alone.
    expect(await recoverPage(env, res.body.id, 2)).toEqual({ more: true });
    expect(await recoverPage(env, res.body.id, 2)).toEqual({ more: false });
    expect(await readRecovery(acct, endpoint, res.body.id)).toMatchObject({ status: "done", total: 4, sent: 3 });
    await waitFor(async () => expect(await statusOf(in3)).toBe("delivered"), 8000, 25);
    await sleep(200);
    const got = receivedAt("/range", before);
    expect(got).toHaveLength(3);
    expect(got.slice(0, 2).sort()).toEqual([in1, in2].sort());
    expect(got[2]).toBe(in3);
    expect(await statusOf(outBefore)).toBe("failed");
    expect(await statusOf(outAfter)).toBe("failed");
    expect(await statusOf(inOk)).toBe("delivered");
  });

  it("on a per_object endpoint, sends an object's missed events in their order", async () => {
    const acct = await signup();
    const since = iso(Date.now() - 1000);
    const endpoint = await register(acct, "/ordered", { events: ["customer.created", "customer.updated"], ordering: "per_object" });
    receiver.answer(500);
    const user = await createUser(acct, { name: "Ada Order" });
    for (const name of ["Ada Two", "Ada Three", "Ada Four"]) {
      const res = await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name, email: "ada@example.com" } });
      expect(res.status, res.text).toBe(200);
    }
    const events = await eventIds(acct);
    expect(events).toHaveLength(4);
    await triedOnce(events[0], endpoint);
    await gaveUp(events.map((id) => deliveryOf(id, endpoint)));

    receiver.answer(200);
    const before = receiver.received.length;
    const res = await recover(acct, endpoint, { since });
    expect(res.status, res.text).toBe(202);
    expect(await waitDone(acct, endpoint, res.body.id)).toMatchObject({ total: 4, sent: 4 });
    await waitFor(() => expect(receivedAt("/ordered", before)).toHaveLength(4), 8000, 25);
    await sleep(200);
    expect(receivedAt("/ordered", before)).toEqual(events);
    const sequences = receiver.received.slice(before).map((r) => r.headers["tender-sequence"]);
    expect(sequences).toEqual([1, 2, 3, 4].map((n) => `${user.id}/${n}`));
  });

  it("a recovery message delivered twice, or run by two workers at once, sends nothing twice", async () => {
    const acct = await signup();
    const since = iso(Date.now() - 1000);
    const endpoint = await register(acct, "/twice");
    receiver.answer(500);
    for (const name of ["Dup One", "Dup Two", "Dup Three", "Dup Four", "Dup Five"]) await createUser(acct, { name });
    const events = await eventIds(acct);
    for (const id of events) await triedOnce(id, endpoint);
    await gaveUp(events.map((id) => deliveryOf(id, endpoint)));

    receiver.answer(200);
    const before = receiver.received.length;
    const res = await recoverHeld(acct, endpoint, { since });
    expect(res.status, res.text).toBe(202);
    const message = { kind: "webhooks.recover" as const, recoveryId: res.body.id };
    // Two workers, pages of one, interleaving over the same recovery.
    await Promise.all([runRecovery(env, message, 1), runRecovery(env, message, 1), runRecovery(env, message, 2)]);
    // Whatever is left (a worker that lost a page stops), then the message once more after it is done.
    for (let i = 0; i < 10 && (await readRecovery(acct, endpoint, res.body.id)).status === "running"; i++) await runRecovery(env, message, 1);
    expect(await readRecovery(acct, endpoint, res.body.id)).toMatchObject({ status: "done", total: 5, sent: 5 });
    await runRecovery(env, message, 1);
    await waitFor(() => expect(receivedAt("/twice", before)).toHaveLength(5), 8000, 25);
    await sleep(300);
    expect(receivedAt("/twice", before).sort()).toEqual([...events].sort());
    expect(await readRecovery(acct, endpoint, res.body.id)).toMatchObject({ status: "done", total: 5, sent: 5 });
  });

  it("a recovery whose message was lost is started by the cron", async () => {
    const acct = await signup();
    const since = iso(Date.now() - 1000);
    const endpoint = await register(acct, "/lost");
    receiver.answer(500);
    await createUser(acct, { name: "Lost One" });
    const [event] = await eventIds(acct);
    await triedOnce(event, endpoint);
    await gaveUp([deliveryOf(event, endpoint)]);
    receiver.answer(200);
    const res = await recoverHeld(acct, endpoint, { since });
    expect(res.status, res.text).toBe(202);
    await runCron(Date.now() + 6 * 60_000);
    expect(await waitDone(acct, endpoint, res.body.id)).toMatchObject({ total: 1, sent: 1 });
  });
});

describe("overlapping recoveries", () => {
  it("answers 409 recovery_in_progress for an overlapping range while one runs, and takes a range that does not overlap", async () => {
    const acct = await signup();
    const endpoint = await register(acct, "/overlap");
    const now = Date.now();
    const first = await recoverHeld(acct, endpoint, { since: iso(now - 3_600_000), until: iso(now - 1_800_000) });
    expect(first.status, first.text).toBe(202);
    const overlapping = await recover(acct, endpoint, { since: iso(now - 2_000_000) });
    expect(overlapping.status, overlapping.text).toBe(409);
    expect(overlapping.body.error).toMatchObject({ type: "invalid_request_error", code: "recovery_in_progress" });
    // Back to back: [since, until) ranges that touch do not overlap.
    const after = await recoverHeld(acct, endpoint, { since: iso(now - 1_800_000) });
    expect(after.status, after.text).toBe(202);
    const before = await recoverHeld(acct, endpoint, { since: iso(now - 7_200_000), until: iso(now - 3_600_000) });
    expect(before.status, before.text).toBe(202);
    // Another endpoint of the account is not held up.
    const other = await register(acct, "/overlap-other");
    expect((await recoverHeld(acct, other, { since: iso(now - 3_600_000) })).status).toBe(202);
    // Once the running one is done, the same range is taken again.
    await runRecovery(env, { kind: "webhooks.recover", recoveryId: first.body.id });
    expect((await readRecovery(acct, endpoint, first.body.id)).status).toBe("done");
    expect((await recoverHeld(acct, endpoint, { since: iso(now - 3_600_000), until: iso(now - 1_800_000) })).status).toBe(202);
    const listed = await call(`/api/webhooks/${endpoint}/recoveries`, { key: acct.key });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data).toHaveLength(4);
    expect(listed.body.data[0].object).toBe("webhook_recovery");
  });

  it("two overlapping requests at once: exactly one starts", async () => {
    const acct = await signup();
    const endpoint = await register(acct, "/race");
    const since = iso(Date.now() - 3_600_000);
    const answers = await Promise.all([recoverHeld(acct, endpoint, { since }), recoverHeld(acct, endpoint, { since }), recoverHeld(acct, endpoint, { since })]);
    expect(answers.map((a) => a.status).sort()).toEqual([202, 409, 409]);
    const running = await env.DB.prepare("SELECT count(*) AS n FROM webhook_recoveries WHERE endpoint_id = ?").bind(endpoint).first<{ n: number }>();
    expect(running!.n).toBe(1);
  });
});

describe("bad ranges and other tenants", () => {
  it("answers 400 naming the field for a since or until that is not ISO 8601, since not before until, and since before the retention", async () => {
    const acct = await signup();
    const endpoint = await register(acct, "/bad");
    const now = Date.now();
    const cases: [object, string, string][] = [
      [{ since: "yesterday" }, "since", "parameter_invalid"],
      [{ since: "2026-13-45T00:00:00Z" }, "since", "parameter_invalid"],
      [{ since: iso(now - 60_000), until: "soon" }, "until", "parameter_invalid"],
      [{ since: 1700000000 }, "since", "parameter_invalid"],
      [{ since: iso(now - 60_000), until: iso(now - 120_000) }, "since", "parameter_invalid"],
      [{ since: iso(now + 60_000) }, "since", "parameter_invalid"],
      [{ since: iso(now - 31 * 86_400_000) }, "since", "since_before_retention"],
      [{}, "since", "parameter_missing"],
      [{ since: iso(now - 60_000), untill: iso(now) }, "untill", "parameter_unknown"],
    ];
    for (const [body, param, code] of cases) {
      const res = await recover(acct, endpoint, body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(400);
      expect(res.body.error, JSON.stringify(body)).toMatchObject({ type: "invalid_request_error", param, code });
      expect(typeof res.body.error.request_id).toBe("string");
    }
    // Within a shorter retention, the same since is refused; inside it, taken.
    expect((await call("/api/account", { key: acct.key, method: "PATCH", body: { event_retention_days: 1 } })).status).toBe(200);
    expect((await recover(acct, endpoint, { since: iso(now - 2 * 86_400_000) })).body.error?.code).toBe("since_before_retention");
    expect((await recoverHeld(acct, endpoint, { since: iso(now - 86_400_000 + 60_000) })).status).toBe(202);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM webhook_recoveries WHERE endpoint_id = ?").bind(endpoint).first<{ n: number }>()).toEqual({ n: 1 });
  });

  it("refuses a disabled endpoint with 409 endpoint_disabled", async () => {
    const acct = await signup();
    const endpoint = await register(acct, "/off");
    expect((await call(`/api/webhooks/${endpoint}`, { key: acct.key, method: "PATCH", body: { status: "disabled" } })).status).toBe(200);
    const res = await recover(acct, endpoint, { since: iso(Date.now() - 60_000) });
    expect(res.status, res.text).toBe(409);
    expect(res.body.error.code).toBe("endpoint_disabled");
  });

  it("another account's or the other mode's endpoint and recovery answer 404", async () => {
    const owner = await signup();
    const stranger = await signup("Stranger");
    const endpoint = await register(owner, "/mine");
    const mine = await recoverHeld(owner, endpoint, { since: iso(Date.now() - 60_000) });
    expect(mine.status).toBe(202);
    const strangerEndpoint = await register(stranger, "/theirs");
    for (const key of [stranger.key, owner.liveKey]) {
      const res = await call(`/api/webhooks/${endpoint}/recover`, { key, body: { since: iso(Date.now() - 60_000) } });
      expect(res.status, res.text).toBe(404);
      expect(res.body.error.param).toBe("id");
      expect((await call(`/api/webhooks/${endpoint}/recoveries/${mine.body.id}`, { key })).status).toBe(404);
      expect((await call(`/api/webhooks/${endpoint}/recoveries`, { key })).status).toBe(404);
    }
    // The stranger's own endpoint with the owner's recovery id: 404 too.
    expect((await call(`/api/webhooks/${strangerEndpoint}/recoveries/${mine.body.id}`, { key: stranger.key })).status).toBe(404);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM webhook_recoveries WHERE account_id IN (?, ?)").bind(owner.id, stranger.id).first<{ n: number }>()).toEqual({ n: 1 });
  });
});
