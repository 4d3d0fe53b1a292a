// The OpenAPI document's `webhooks` section: one entry per event type of the catalog (and
// webhook.test), each with its payload schema; every real delivery of every type matches its
// schema exactly (no field missing, none undocumented), and docs/webhooks.md's receiver handles it.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TRIGGERS } from "@tender/client/cli";
import { describeEvent } from "../../clients/typescript/examples/handle-events";
import webhooksDoc from "../../docs/webhooks.md?raw";
import handlerSource from "../../clients/typescript/examples/handle-events.ts?raw";
import { EVENT_TYPES, TEST_EVENT_TYPE } from "../../src/webhooks/catalog";
import { WEBHOOK_PAYLOADS, payloadSchemaName } from "../../src/routes/events/payloads";
import { call, signup } from "../support/http";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { tenderFor } from "../client/support";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

type Document = {
  webhooks: Record<string, { post: { requestBody: { content: { "application/json": { schema: { $ref: string } } } }; security: unknown[]; summary: string } }>;
  components: { schemas: Record<string, unknown> };
};

describe("the webhooks section of /openapi.json", () => {
  it("has an entry for every event type of the catalog and for webhook.test, each with its payload schema", async () => {
    const res = await call("/openapi.json");
    expect(res.status).toBe(200);
    const document = res.body as Document;
    expect(Object.keys(document.webhooks).sort()).toEqual([...EVENT_TYPES, TEST_EVENT_TYPE].sort());
    for (const type of [...EVENT_TYPES, TEST_EVENT_TYPE]) {
      const post = document.webhooks[type].post;
      expect(post.requestBody.content["application/json"].schema.$ref, type).toBe(`#/components/schemas/${payloadSchemaName(type)}`);
      expect(document.components.schemas[payloadSchemaName(type)], type).toBeDefined();
      expect(post.security).toEqual([]);
      expect(post.summary).toContain(type);
    }
    expect(Object.keys(WEBHOOK_PAYLOADS).sort()).toEqual(Object.keys(document.webhooks).sort());
  });

  it("a real delivery of every event type matches its schema exactly, and docs/webhooks.md's receiver handles each by type", { timeout: 120_000 }, async () => {
    const acct = await signup();
    const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/every`, events: ["*"] } });
    expect(hook.status).toBe(201);
    const { tender } = tenderFor(acct.key);
    for (const plan of Object.values(TRIGGERS)) await plan.run({ tender, say: () => {}, now: Date.now() });
    expect((await call(`/api/webhooks/${hook.body.id}/test`, { key: acct.key, body: {} })).status).toBe(202);

    const byType = await waitFor(
      () => {
        const seen = new Map<string, unknown>();
        for (const r of receiver.received) {
          const body = JSON.parse(r.body) as { type: string };
          seen.set(body.type, body);
        }
        expect([...seen.keys()].sort()).toEqual([...EVENT_TYPES, TEST_EVENT_TYPE].sort());
        return seen;
      },
      60_000,
      200,
    );
    for (const [type, body] of byType) {
      const schema = WEBHOOK_PAYLOADS[type as keyof typeof WEBHOOK_PAYLOADS];
      const parsed = schema.safeParse(body);
      expect(parsed.error, `${type}: ${JSON.stringify(body)}`).toBeUndefined();
      // Parsing drops what the schema does not know: an undocumented field would be missing here.
      expect(parsed.data, type).toEqual(body);
      const line = describeEvent(body as Parameters<typeof describeEvent>[0]);
      expect(line.startsWith(type), line).toBe(true);
      expect(line).not.toMatch(/undefined|unhandled/);
    }
    // What each notification's status says, and what its data says.
    const renewal = byType.get("subscription_renewal") as { status: string; data: { object: string } };
    expect(renewal).toMatchObject({ status: "success", data: { object: "subscription" } });
  });

  it("docs/webhooks.md shows the receiver that handles every event by type, verbatim", () => {
    const block = /<!-- clients\/typescript\/examples\/handle-events\.ts -->\n```ts\n([\s\S]*?)```\n<!-- \/clients\/typescript\/examples\/handle-events\.ts -->/.exec(webhooksDoc);
    expect(block, "docs/webhooks.md's receiver block (between its markers) is missing").not.toBeNull();
    expect(block![1]).toBe(handlerSource);
  });

  it("a payload with a field missing, or of another type, does not match", () => {
    const schema = WEBHOOK_PAYLOADS["payout.paid"];
    const body = { id: "evt_x", type: "payout.paid", created_at: "2026-11-21T12:00:00.000Z", object_id: "po_x", sequence: 1, livemode: false, data: {} };
    expect(schema.safeParse(body).success).toBe(false);
    expect(WEBHOOK_PAYLOADS["webhook.test"].safeParse({ ...body, type: "webhook.test", object_id: null, sequence: null, data: { endpoint_id: "whk_x", message: "hi" } }).success).toBe(true);
    expect(WEBHOOK_PAYLOADS["customer.created"].safeParse({ ...body, type: "customer.updated" }).success).toBe(false);
  });
});
