// webhooks.verify on real deliveries from the Worker (the receiver is simulated, the queue and
// the signing are real): either header style verifies, anything tampered with is refused.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Tender, TenderError, WebhookVerificationError, webhooks, type WebhookEvent } from "@tender/client";
import { signup } from "../support/http";
import { installReceiver, RECEIVER_ORIGIN, type Received } from "../support/receiver";
import { waitFor } from "../support/wait";
import { tenderFor } from "./support";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

const pick = (headers: Record<string, string>, ...names: string[]) => Object.fromEntries(names.map((name) => [name, headers[name]]));
const STANDARD = ["webhook-id", "webhook-timestamp", "webhook-signature"];

/** A real delivery of customer.created, with the endpoint's secret. */
async function delivered(): Promise<{ tender: Tender; secret: string; delivery: Received; user: { id: string } }> {
  const acct = await signup();
  const { tender } = tenderFor(acct.key);
  const endpoint = await tender.POST("/api/webhooks", { body: { url: `${RECEIVER_ORIGIN}/hooks`, events: ["customer.created"] } });
  expect(endpoint.secret).toMatch(/^whsec_/);
  const user = await tender.POST("/api/users", { body: { name: "Ada Lovelace", email: "ada@example.com" } });
  await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
  return { tender, secret: endpoint.secret!, delivery: receiver.received[0], user };
}

async function refusal(promise: Promise<unknown>) {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WebhookVerificationError);
  expect(error).toBeInstanceOf(TenderError);
  expect(error).toMatchObject({ type: "webhook_verification_error", status: 400 });
  return error as WebhookVerificationError;
}

describe("webhooks.verify", () => {
  it("verifies a real delivery by its Standard Webhooks headers and by X-Signature, and returns the typed event", async () => {
    const { tender, secret, delivery, user } = await delivered();
    const standard = await tender.webhooks.verify(delivery.body, pick(delivery.headers, ...STANDARD), secret);
    const hex = await webhooks.verify(delivery.body, pick(delivery.headers, "x-signature"), secret);
    for (const event of [standard, hex]) {
      expect("type" in event && event.type).toBe("customer.created");
      if (!("type" in event) || event.type !== "customer.created") throw new Error("unreachable");
      // Typed: data is a User here.
      expect(event.data.id).toBe(user.id);
      expect(event.data.email).toBe("ada@example.com");
      expect(event.id).toBe(delivery.headers["webhook-id"]);
    }
    // All the headers at once (as a receiver gets them), as Headers, or as bytes: the same event.
    expect(await webhooks.verify(delivery.body, delivery.headers, secret)).toEqual(standard);
    expect(await webhooks.verify(new TextEncoder().encode(delivery.body), new Headers(delivery.headers), secret)).toEqual(standard);
  });

  it("refuses a tampered body, the wrong secret, a forged or missing signature, under either header style", async () => {
    const { secret, delivery } = await delivered();
    const tampered = delivery.body.replace("ada@example.com", "eve@example.com");
    expect(tampered).not.toBe(delivery.body);
    const other = webhooks.newSecret();
    for (const names of [STANDARD, ["x-signature"]]) {
      const headers = pick(delivery.headers, ...names);
      expect((await refusal(webhooks.verify(tampered, headers, secret))).code).toBe("signature_invalid");
      expect((await refusal(webhooks.verify(delivery.body, headers, other))).code).toBe("signature_invalid");
    }
    const forged = { ...pick(delivery.headers, ...STANDARD), "webhook-signature": "v1,AAAA" };
    expect((await refusal(webhooks.verify(delivery.body, forged, secret))).code).toBe("signature_invalid");
    expect((await refusal(webhooks.verify(delivery.body, { "x-signature": "00".repeat(32) }, secret))).code).toBe("signature_invalid");
    expect((await refusal(webhooks.verify(delivery.body, { "content-type": "application/json" }, secret))).code).toBe("signature_missing");
  });

  it("refuses a Standard Webhooks delivery signed more than 5 minutes ago (a replay), and accepts one signed 4 minutes ago", async () => {
    const secret = webhooks.newSecret();
    const body = JSON.stringify({ id: "evt_1", type: "customer.created", data: {}, created_at: new Date().toISOString(), sequence: 1 });
    const old = await webhooks.sign(secret, { id: "evt_1", body, timestamp: new Date(Date.now() - 6 * 60_000) });
    const error = await refusal(webhooks.verify(body, pick(old, ...STANDARD), secret));
    expect(error.code).toBe("timestamp_invalid");
    const recent = await webhooks.sign(secret, { id: "evt_1", body, timestamp: new Date(Date.now() - 4 * 60_000) });
    const event: WebhookEvent = await webhooks.verify(body, pick(recent, ...STANDARD), secret);
    expect(event.id).toBe("evt_1");
  });

  it("webhooks.sign makes the headers Tender sends: the Worker's own signature scheme verifies them", async () => {
    const { secret, delivery } = await delivered();
    const timestamp = new Date(Number(delivery.headers["webhook-timestamp"]) * 1000);
    const signed = await webhooks.sign(secret, { id: delivery.headers["webhook-id"], body: delivery.body, timestamp });
    expect(signed["X-Signature"]).toBe(delivery.headers["x-signature"]);
    expect(signed["webhook-signature"]).toBe(delivery.headers["webhook-signature"]);
    expect(signed["webhook-timestamp"]).toBe(delivery.headers["webhook-timestamp"]);
  });

  it("a body that verifies but is not JSON is refused", async () => {
    const secret = webhooks.newSecret();
    const headers = await webhooks.sign(secret, { id: "evt_x", body: "not json" });
    expect((await refusal(webhooks.verify("not json", headers, secret))).code).toBe("payload_invalid");
  });
});
