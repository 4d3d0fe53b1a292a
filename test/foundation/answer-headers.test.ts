// The shared request path sets its answer headers (Request-Id, Tender-Consistency, Tender-Shard,
// Tender-Version) on the answer the route built: no copy of the answer per header (Hono's
// c.header() after the handler copied the whole Response, body and headers, on every call).
import { afterEach, describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { CURRENT_API_VERSION } from "../../src/domain/api-versions";
import { createUser, warm } from "../support/fixtures";
import { CARDS } from "../support/cards";

/** The globals the Worker constructs its answers and decoders from. */
const globals = globalThis as unknown as { Response: typeof Response; TextDecoder: typeof TextDecoder };
const NativeResponse = globals.Response;
const NativeTextDecoder = globals.TextDecoder;
let built = 0;
let decoders = 0;
/** Counts the Responses constructed while `work` runs (the Worker shares this isolate's globals). */
async function responsesBuiltBy<T>(work: () => Promise<T>): Promise<{ result: T; built: number }> {
  built = 0;
  decoders = 0;
  globals.TextDecoder = new Proxy(NativeTextDecoder, {
    construct(target, args, newTarget) {
      if (!new Error().stack?.includes("vitest-plugin")) decoders++;
      return Reflect.construct(target, args, newTarget === globals.TextDecoder ? target : newTarget);
    },
  });
  globals.Response = new Proxy(NativeResponse, {
    construct(target, args, newTarget) {
      // The test harness's own Responses (vitest's runner) are not the Worker's.
      if (!new Error().stack?.includes("vitest-plugin")) built++;
      return Reflect.construct(target, args, newTarget === globals.Response ? target : newTarget);
    },
  });
  try {
    const result = await work();
    return { result, built };
  } finally {
    globals.Response = NativeResponse;
    globals.TextDecoder = NativeTextDecoder;
  }
}
afterEach(() => {
  globals.Response = NativeResponse;
  globals.TextDecoder = NativeTextDecoder;
});

describe("answer headers on the shared request path", () => {
  it("a read by id and a payout each build their answer once, with every header of the shared path on it", async () => {
    // Pinned to the current version: an older one's answer is rebuilt in its shape (src/middleware/version.ts).
    const acct = await signup("Acme", { apiVersion: CURRENT_API_VERSION });
    const user = await createUser(acct);
    await warm(acct.key);
    const read = await responsesBuiltBy(() => call(`/api/users/${user.id}`, { key: acct.key }));
    expect(read.result.status).toBe(200);
    for (const header of ["request-id", "tender-consistency", "tender-shard", "tender-version", "tender-d1-round-trips"]) expect(read.result.headers.get(header), header).toBeTruthy();
    expect(read.built).toBe(1);
    const payout = await responsesBuiltBy(() =>
      call("/payout", {
        key: acct.key,
        idempotencyKey: "answer-headers-1",
        body: { recipient_id: user.id, amount: 1000, currency: "usd", payment_method: "card", card_number: CARDS.visa, expiration_month: 12, expiration_year: 2031, cvv: "123" },
      }),
    );
    expect(payout.result.status).toBe(201);
    for (const header of ["request-id", "tender-consistency", "tender-shard", "tender-version"]) expect(payout.result.headers.get(header), header).toBeTruthy();
    expect(payout.built).toBe(1);
    // Its JSON body is decoded by the module's one TextDecoder, not a new one per request.
    expect(decoders).toBe(0);
  });

  it("an answer in an older API version is rebuilt in its shape once, keeping every header", async () => {
    const acct = await signup("Acme", { apiVersion: "2026-11-22" });
    const user = await createUser(acct);
    await warm(acct.key);
    const read = await responsesBuiltBy(() => call(`/api/users/${user.id}`, { key: acct.key }));
    expect(read.result.status).toBe(200);
    expect(read.result.headers.get("tender-version")).toBe("2026-11-22");
    expect(read.result.headers.get("content-type")).toMatch(/^application\/json/);
    for (const header of ["request-id", "tender-consistency", "tender-shard"]) expect(read.result.headers.get(header), header).toBeTruthy();
    expect(read.result.body).toMatchObject({ id: user.id, object: "user" });
    // The route's answer, then the one in the older shape.
    expect(read.built).toBe(2);
  });

  it("an error answer (404, 401) carries the request id and the shared headers, built once", async () => {
    const acct = await signup("Acme", { apiVersion: CURRENT_API_VERSION });
    await warm(acct.key);
    const missing = await responsesBuiltBy(() => call("/api/users/usr_00000000000000000000000000", { key: acct.key }));
    expect(missing.result.status).toBe(404);
    expect(missing.result.headers.get("request-id")).toBe(missing.result.body.error.request_id);
    expect(missing.result.headers.get("tender-version")).toBeTruthy();
    expect(missing.built).toBe(1);
    const unknownKey = await responsesBuiltBy(() => call("/api/users", { key: "sk_test_0000000000000000000000000000000x" }));
    expect(unknownKey.result.status).toBe(401);
    expect(unknownKey.result.headers.get("request-id")).toBe(unknownKey.result.body.error.request_id);
    expect(unknownKey.result.headers.get("www-authenticate")).toMatch(/^Bearer/);
  });
});
