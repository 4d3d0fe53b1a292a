// The client's types are generated from a committed snapshot of the API's OpenAPI document
// (clients/typescript/openapi.json -> src/schema.d.ts, by `npm run generate -w @tender/client`).
// These fail when the Worker's document has moved on from the snapshot, or when the generated
// types were not regenerated from the snapshot as it is.
import { describe, expect, it } from "vitest";
import snapshot from "../../clients/typescript/openapi.json?raw";
import schema from "../../clients/typescript/src/schema.d.ts?raw";
import { call } from "../support/http";
import { API_VERSION } from "../../clients/typescript/src/api-version";

const REGENERATE = "the client's types are stale: run `npm run generate -w @tender/client` and commit clients/typescript/openapi.json, src/schema.d.ts and src/api-version.ts";

async function sha256Hex(text: string) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

describe("generated client types", () => {
  it("the committed openapi.json is the document the Worker serves", async () => {
    const served = await call("/openapi.json");
    expect(served.status).toBe(200);
    expect(JSON.parse(snapshot), REGENERATE).toEqual(served.body);
  });

  it("src/schema.d.ts was generated from openapi.json as committed (its recorded hash)", async () => {
    const recorded = /^\/\/ openapi\.json sha256: ([0-9a-f]{64})$/m.exec(schema)?.[1];
    expect(recorded, "schema.d.ts has no hash line: regenerate it").toBeDefined();
    expect(recorded, REGENERATE).toBe(await sha256Hex(snapshot));
  });

  it("src/api-version.ts names the document's API version (the client's default Tender-Version)", () => {
    expect(API_VERSION, REGENERATE).toBe((JSON.parse(snapshot) as { info: { version: string } }).info.version);
  });

  it("every event type of the document's webhooks section has a generated type", () => {
    const document = JSON.parse(snapshot) as { webhooks: Record<string, { post: { operationId: string } }> };
    expect(Object.keys(document.webhooks).length).toBeGreaterThan(0);
    const generated = schema.slice(schema.indexOf("export interface webhooks {"));
    for (const [type, { post }] of Object.entries(document.webhooks)) {
      // openapi-typescript quotes a key only where it must ("payment.completed", not subscription_created).
      expect(generated, type).toMatch(new RegExp(`\n    "?${type.replace(".", "\\.")}"?: \\{`));
      expect(schema).toContain(`${post.operationId}: {`);
    }
  });

  it("every path and operation of the document has a type", () => {
    const document = JSON.parse(snapshot) as { paths: Record<string, Record<string, { operationId?: string }>> };
    for (const [path, operations] of Object.entries(document.paths)) {
      expect(schema, path).toContain(`"${path}": {`);
      for (const operation of Object.values(operations)) if (operation.operationId) expect(schema).toContain(`${operation.operationId}: {`);
    }
  });
});
