// An older API version reshapes the API's own objects, never the caller's data: the 2026-11-01
// downgrade removes `object_id` and `sequence` from event objects (an event answer, the items of a
// list of events), and from nothing else, however much a metadata object, an event's `data` or its
// delivered `payload` looks like an event (src/domain/api-versions.ts).
import { describe, expect, it } from "vitest";
import { CURRENT_API_VERSION, answerForVersion } from "../../src/domain/api-versions";
import { call, signup } from "../support/http";
import { createUser } from "../support/fixtures";

const FIRST = "2026-11-01";
const EVENT_LIKE = { object: "event", object_id: "x", sequence: 1, note: "kept" };

describe("downgrades touch the schema's own positions only", () => {
  it("a request id's metadata that looks like an event reads back unchanged in every version: created, read, listed and replayed", async () => {
    const acct = await signup();
    const old = { "tender-version": FIRST };
    const created = await call("/api/request-id", { key: acct.key, body: { purpose: "x", metadata: EVENT_LIKE }, headers: old, idempotencyKey: "meta-event-1" });
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get("tender-version")).toBe(FIRST);
    expect(created.body.metadata).toEqual(EVENT_LIKE);
    for (const version of [FIRST, CURRENT_API_VERSION]) {
      const headers = { "tender-version": version };
      const read = await call(`/api/request-id/${created.body.id}`, { key: acct.key, headers });
      expect(read.status, read.text).toBe(200);
      expect(read.body.metadata, `GET in ${version}`).toEqual(EVENT_LIKE);
      const list = await call("/api/request-id", { key: acct.key, headers });
      expect(list.status, list.text).toBe(200);
      expect(list.body.data.find((r: { id: string }) => r.id === created.body.id)?.metadata, `list in ${version}`).toEqual(EVENT_LIKE);
      const replay = await call("/api/request-id", { key: acct.key, body: { purpose: "x", metadata: EVENT_LIKE }, headers, idempotencyKey: "meta-event-1" });
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.body.metadata, `replay in ${version}`).toEqual(EVENT_LIKE);
    }
  });

  it("events themselves still lose object_id and sequence in 2026-11-01, and their data and payload are left as delivered", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const current = await call("/api/events", { key: acct.key, headers: { "tender-version": CURRENT_API_VERSION } });
    const old = await call("/api/events", { key: acct.key, headers: { "tender-version": FIRST } });
    const [now] = current.body.data;
    const [then] = old.body.data;
    expect(now).toMatchObject({ object: "event", object_id: user.id, sequence: 1 });
    const { object_id: _objectId, sequence: _sequence, ...rest } = now;
    expect(then).toEqual(rest);
    expect(then.payload).toEqual(now.payload);
    const single = await call(`/api/events/${now.id}`, { key: acct.key, headers: { "tender-version": FIRST } });
    expect(single.body).toEqual(rest);
  });

  it("answerForVersion reshapes an event answer and a list of events, nothing nested in them, and no other object", () => {
    const event = { id: "evt_1", object: "event", type: "t", object_id: "usr_1", sequence: 3, data: { ...EVENT_LIKE }, payload: { ...EVENT_LIKE, nested: [{ ...EVENT_LIKE }] } };
    const { object_id: _o, sequence: _s, ...downgraded } = event;
    expect(answerForVersion(event, FIRST)).toEqual(downgraded);
    expect(answerForVersion({ object: "list", data: [event, event], has_more: false }, FIRST)).toEqual({ object: "list", data: [downgraded, downgraded], has_more: false });
    for (const other of [
      { id: "r", object: "request_id", metadata: { ...EVENT_LIKE } },
      { object: "list", data: [{ object: "request_id", metadata: { ...EVENT_LIKE } }], has_more: false },
      { object: "user", name: "x", extra: [{ ...EVENT_LIKE }] },
      [{ ...EVENT_LIKE }],
    ]) {
      expect(answerForVersion(other, FIRST)).toEqual(other);
    }
    expect(answerForVersion(event, CURRENT_API_VERSION)).toEqual(event);
  });
});
