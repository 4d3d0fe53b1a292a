// The delivery floor (issue 35): the least a webhook delivery can cost on Tender's stack.
//   POST /events   {count}: `count` events (the burst's payloads), in batches of 100 INSERTs
//   POST /recover  {url, secret}: a new endpoint, a delivery per event for it (a page of 100 a
//                  batch, as Tender's recovery pages), each page enqueued (sendBatch, as Tender's outbox)
//   queue          per message: ONE read (the delivery with its event and endpoint), the POST signed
//                  with HMAC-SHA256 (X-Signature hex over the body, and Standard Webhooks' v1 over
//                  "id.timestamp.body"), ONE batch recording the attempt and the delivery's status.
import { Hono } from "hono";

type Bindings = { DB: D1Database; DELIVERY_QUEUE: Queue<{ deliveryId: string }> };
const app = new Hono<{ Bindings: Bindings }>();
const PAGE = 100;
const encoder = new TextEncoder();

app.get("/health", (c) => c.json({ status: "ok" }));

app.post("/events", async (c) => {
  const { count } = await c.req.json<{ count: number }>();
  const now = new Date().toISOString();
  for (let i = 0; i < count; i += PAGE) {
    const statements = [];
    for (let j = i; j < Math.min(count, i + PAGE); j++) {
      const id = `evt_${crypto.randomUUID().replaceAll("-", "")}`;
      const payload = JSON.stringify({ id, object: "event", type: "customer.created", created: now, data: { object: { id: `usr_${j}`, object: "customer", name: `Burst ${j}`, email: `burst${j}@example.com` } } });
      statements.push(c.env.DB.prepare("INSERT INTO events (id, type, payload, created_at) VALUES (?, ?, ?, ?)").bind(id, "customer.created", payload, now));
    }
    await c.env.DB.batch(statements);
  }
  return c.json({ count }, 201);
});

app.post("/recover", async (c) => {
  const { url, secret } = await c.req.json<{ url: string; secret: string }>();
  const endpointId = `we_${crypto.randomUUID().replaceAll("-", "")}`;
  await c.env.DB.prepare("INSERT INTO endpoints (id, url, secret) VALUES (?, ?, ?)").bind(endpointId, url, secret).run();
  let after = "";
  let total = 0;
  for (;;) {
    const [, page] = await c.env.DB.batch<{ id: string }>([
      c.env.DB.prepare(
        `INSERT INTO deliveries (id, event_id, endpoint_id, status, updated_at)
         SELECT 'wd_' || ?1 || '_' || id, id, ?1, 'pending', ?3 FROM events WHERE id > ?2 ORDER BY id LIMIT ${PAGE}`,
      ).bind(endpointId, after, Date.now()),
      c.env.DB.prepare(`SELECT 'wd_' || ?1 || '_' || id AS id FROM events WHERE id > ?2 ORDER BY id LIMIT ${PAGE}`).bind(endpointId, after),
    ]);
    const ids = page.results.map((r) => r.id);
    if (ids.length === 0) break;
    await c.env.DELIVERY_QUEUE.sendBatch(ids.map((deliveryId) => ({ body: { deliveryId } })));
    total += ids.length;
    after = ids.at(-1)!.slice(`wd_${endpointId}_`.length);
  }
  return c.json({ endpoint: endpointId, deliveries: total }, 201);
});

async function hmac(key: Uint8Array, message: string): Promise<Uint8Array> {
  const k = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", k, encoder.encode(message)));
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const base64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
const fromBase64 = (text: string) => Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0));

interface Row {
  id: string;
  attempt_count: number;
  event_id: string;
  payload: string;
  url: string;
  secret: string;
}

async function deliver(env: Bindings, deliveryId: string): Promise<void> {
  const row = await env.DB.prepare(
    `SELECT d.id, d.attempt_count, e.id AS event_id, e.payload, w.url, w.secret
     FROM deliveries d JOIN events e ON e.id = d.event_id JOIN endpoints w ON w.id = d.endpoint_id
     WHERE d.id = ? AND d.status = 'pending'`,
  )
    .bind(deliveryId)
    .first<Row>();
  if (!row) return;
  const now = Date.now();
  const timestamp = Math.floor(now / 1000);
  const body = row.payload;
  const headers = {
    "Content-Type": "application/json",
    "X-Signature": hex(await hmac(encoder.encode(row.secret), body)),
    "webhook-id": row.event_id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": `v1,${base64(await hmac(fromBase64(row.secret.slice("whsec_".length)), `${row.event_id}.${timestamp}.${body}`))}`,
  };
  const started = performance.now();
  let status: number | null = null;
  let excerpt: string | null = null;
  let error: string | null = null;
  try {
    const response = await fetch(row.url, { method: "POST", headers, body, redirect: "manual", signal: AbortSignal.timeout(15_000) });
    status = response.status;
    excerpt = (await response.text()).slice(0, 1024);
  } catch (cause) {
    error = String(cause).slice(0, 500);
  }
  const attempt = row.attempt_count + 1;
  const ok = status !== null && status >= 200 && status < 300;
  await env.DB.batch([
    env.DB.prepare(
      "INSERT INTO attempts (id, delivery_id, attempt_number, status_code, duration_ms, response_excerpt, error, attempted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    ).bind(`att_${crypto.randomUUID().replaceAll("-", "")}`, row.id, attempt, status, Math.round(performance.now() - started), excerpt, error, new Date(now).toISOString()),
    env.DB.prepare("UPDATE deliveries SET status = ?, attempt_count = ?, last_status_code = ?, updated_at = ? WHERE id = ? AND status = 'pending'").bind(
      ok ? "delivered" : "failed",
      attempt,
      status,
      now,
      row.id,
    ),
  ]);
}

export default {
  fetch: app.fetch,
  async queue(batch: MessageBatch<{ deliveryId: string }>, env: Bindings): Promise<void> {
    await Promise.all(
      batch.messages.map(async (message) => {
        try {
          await deliver(env, message.body.deliveryId);
          message.ack();
        } catch {
          message.retry();
        }
      }),
    );
  },
} satisfies ExportedHandler<Bindings, { deliveryId: string }>;
