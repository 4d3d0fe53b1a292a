// The endpoint page's "Recover missed events" form: it starts a recovery through
// POST /api/webhooks/{id}/recover as the session's key (times typed in UTC), and the page lists
// the endpoint's recoveries with their status and counts.
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { env } from "../support/env";
import { type Account, call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { RECEIVER_ORIGIN, installReceiver } from "../support/receiver";
import { waitFor } from "../support/wait";
import { dashboardFetch, formOf, signIn, submit, textOf } from "./support";

let acct: Account;
let cookie: string;
beforeAll(async () => {
  acct = await signup("Dash Recovery");
  cookie = await signIn(acct.key);
});
let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

describe("endpoint page: recover missed events", () => {
  it("recovers a range typed in UTC, then shows the recovery done with its counts; a bad range gets the API's 400", async () => {
    const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/dash-recover`, events: ["customer.created"] } });
    expect(hook.status, hook.text).toBe(201);
    const endpoint = hook.body.id as string;
    receiver.answer(500);
    await createUser(acct, { name: "Dash Missed" });
    const delivery = await waitFor(async () => {
      const row = await env.DB.prepare("SELECT id FROM webhook_deliveries WHERE endpoint_id = ? AND attempt_count >= 1").bind(endpoint).first<{ id: string }>();
      expect(row).not.toBeNull();
      return row!.id;
    }, 8000, 25);
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL WHERE id = ?").bind(delivery).run();
    receiver.answer(200);

    const page = `/dashboard/webhooks/${endpoint}`;
    const loaded = await dashboardFetch(page, { cookie });
    expect(loaded.status).toBe(200);
    expect(textOf(loaded.html)).toContain("Recover missed events");
    const form = formOf(loaded.html, `${page}/recover`);
    expect(form.since).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/);
    // A minute ago, as a datetime-local field sends it (no zone: the form says UTC).
    const since = new Date(Date.now() - 60_000).toISOString().slice(0, 19);
    const started = await dashboardFetch(`${page}/recover`, { cookie, form: { ...form, since } });
    expect(started.status, started.html.slice(0, 400)).toBe(303);
    expect(started.location).toMatch(new RegExp(`^${page}\\?done=recovery_started&id=rcv_`));
    const recoveryId = new URL(started.location!, "http://x").searchParams.get("id")!;
    const read = await call(`/api/webhooks/${endpoint}/recoveries/${recoveryId}`, { key: acct.key });
    expect(read.body.since).toBe(`${since}.000Z`);

    const shown = await waitFor(async () => {
      const after = await dashboardFetch(page, { cookie });
      expect(after.html).toContain(`data-recovery="${recoveryId}" data-status="done"`);
      return after;
    }, 10_000, 100);
    const row = shown.html.slice(shown.html.indexOf(`data-recovery="${recoveryId}"`));
    expect(textOf(row.slice(0, row.indexOf("</tr>")))).toMatch(/done 1 1/);
    await waitFor(async () => expect((await env.DB.prepare("SELECT status FROM webhook_deliveries WHERE id = ?").bind(delivery).first<{ status: string }>())!.status).toBe("delivered"), 8000, 25);

    const bad = await submit(cookie, page, `${page}/recover`, { since: "not a time" });
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("parameter_invalid");
  });
});
