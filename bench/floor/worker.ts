// The floor of Tender's stack (issue 23): the same D1 work as Tender's hot paths and nothing else.
//   GET  /health      no D1
//   GET  /items/:id   one read by id (as GET /api/users/{id})
//   POST /items       one INSERT
//   POST /batch       one batch of three INSERTs: the object, its idempotency record and its event
//                     (as POST /payout with an Idempotency-Key)
import { Hono } from "hono";

type Env = { Bindings: { DB: D1Database } };
const app = new Hono<Env>();

app.get("/health", (c) => c.json({ status: "ok" }));

app.get("/items/:id", async (c) => {
  const row = await c.env.DB.prepare("SELECT * FROM items WHERE id = ?").bind(c.req.param("id")).first();
  return row ? c.json(row) : c.json({ error: "not found" }, 404);
});

app.post("/items", async (c) => {
  const body = await c.req.json<{ name: string }>();
  const id = crypto.randomUUID();
  await c.env.DB.prepare("INSERT INTO items (id, account_id, name, body, created_at) VALUES (?, ?, ?, ?, ?)")
    .bind(id, "acct", body.name, JSON.stringify(body), new Date().toISOString())
    .run();
  return c.json({ id, ...body }, 201);
});

app.post("/batch", async (c) => {
  const body = await c.req.json<Record<string, unknown>>();
  const id = crypto.randomUUID();
  const now = new Date().toISOString();
  const answer = JSON.stringify({ id, ...body });
  await c.env.DB.batch([
    c.env.DB.prepare("INSERT INTO items (id, account_id, name, body, created_at) VALUES (?, ?, ?, ?, ?)").bind(id, "acct", "payout", JSON.stringify(body), now),
    c.env.DB.prepare("INSERT INTO records (account_id, key, response, created_at) VALUES (?, ?, ?, ?)").bind("acct", c.req.header("idempotency-key") ?? id, answer, now),
    c.env.DB.prepare("INSERT INTO events (id, account_id, type, payload, created_at) VALUES (?, ?, ?, ?, ?)").bind(crypto.randomUUID(), "acct", "payout.created", answer, now),
  ]);
  return c.json(JSON.parse(answer), 201);
});

export default app;
