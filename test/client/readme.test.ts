// The client README's integration is examples/integration.ts, verbatim; it runs here as written,
// against the Worker, through to a verified payout.paid webhook.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import readme from "../../clients/typescript/README.md?raw";
import rootReadme from "../../README.md?raw";
import snippet from "../../clients/typescript/examples/integration.ts?raw";
import { onWebhook, payVendor } from "../../clients/typescript/examples/integration";
import { BASE, call, signup } from "../support/http";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { workerFetch } from "./support";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => {
  receiver.restore();
  vi.restoreAllMocks();
});

describe("clients/typescript/README.md", () => {
  it("includes examples/integration.ts verbatim, and the integration is about 15 lines", () => {
    for (const text of [readme, rootReadme]) {
      const block = /<!-- examples\/integration\.ts -->\n```ts\n([\s\S]*?)```\n<!-- \/examples\/integration\.ts -->/.exec(text);
      expect(block, "the README's integration block (between its markers) is missing").not.toBeNull();
      expect(block![1]).toBe(snippet);
    }
    const code = snippet.split("\n").filter((line) => line.trim() && !line.trim().startsWith("//"));
    expect(code.length).toBeLessThanOrEqual(16);
  });

  it("runs as written: a user, a payout, and the payout.paid webhook verified (a tampered copy refused)", { timeout: 30_000 }, async () => {
    const acct = await signup();
    const endpoint = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/integration`, events: ["payout.paid"] } });
    expect(endpoint.status).toBe(201);

    const { user, payout } = await payVendor({ apiKey: acct.key, baseUrl: BASE, fetch: workerFetch().fetch });
    expect(user).toMatchObject({ name: "Ada Lovelace", email: "ada@example.com" });
    expect(payout).toMatchObject({ recipient_id: user.id, amount: 5000, currency: "usd", status: "pending" });

    await waitFor(() => expect(receiver.received).toHaveLength(1), 20_000, 100); // after the 5 s cancel window
    const delivery = receiver.received[0];
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    const request = (body: string) => new Request("https://example.com/webhooks", { method: "POST", headers: delivery.headers, body });
    const answer = await onWebhook(request(delivery.body), endpoint.body.secret);
    expect(answer.status).toBe(204);
    expect(log).toHaveBeenCalledWith(`paid 5000 usd to ${user.id}`);

    const tampered = await onWebhook(request(delivery.body.replace('"amount":5000', '"amount":500000')), endpoint.body.secret);
    expect(tampered.status).toBe(400);
    expect(await tampered.text()).toBe("Invalid signature");
    expect(log).toHaveBeenCalledTimes(1);
  });
});
