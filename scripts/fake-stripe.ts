// `npm run fake-stripe`: the fake Stripe of the tests (test/support/fake-stripe.ts) as a local
// server, for `npm run dev` with STRIPE_API_BASE=http://127.0.0.1:12111 (honoured in development
// only). It serves the Stripe operations Tender uses, checked against Stripe's OpenAPI document,
// with Stripe's fixtures as its objects; `/_fake/…` tells it what to do (docs/live-mode.md, "A fake
// Stripe"). Node runs it as TypeScript (type stripping, Node >= 22.18; npm's scripts use the
// project's node@24). FAKE_STRIPE_PORT changes the port.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { FakeStripe } from "../test/support/fake-stripe.ts";

const root = path.resolve(import.meta.dirname, "..");
const read = (file: string) => JSON.parse(readFileSync(path.join(root, "test/fixtures/stripe", file), "utf8"));
const port = Number(process.env.FAKE_STRIPE_PORT ?? 12111);
const fake = new FakeStripe({ spec: read("openapi.json"), fixtures: read("fixtures.json") });

const server = createServer(async (req, res) => {
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (typeof value === "string") headers.set(name, value);
      else if (Array.isArray(value)) headers.set(name, value.join(", "));
    }
    const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
    });
    const { response, drop } = await fake.serve(request);
    const last = fake.requests.at(-1);
    if (last && !req.url?.startsWith("/_fake/")) {
      console.log(`${req.method} ${req.url?.split("?")[0]} -> ${drop ? "dropped" : response.status}${last.replayed ? " (replayed)" : ""}${last.fault ? ` [${last.fault}]` : ""}${last.violations.length ? ` spec: ${last.violations.join("; ")}` : ""}`);
    }
    if (drop) {
      // The request ran; the caller never hears back (a timeout after success).
      req.socket.destroy();
      return;
    }
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  } catch (error) {
    res.writeHead(500, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: { type: "api_error", message: `fake Stripe: ${error instanceof Error ? error.message : String(error)}` } }));
  }
});

server.listen(port, "127.0.0.1", () => {
  console.log(`Fake Stripe on http://127.0.0.1:${port} (platform account ${fake.platformAccount}). Control: http://127.0.0.1:${port}/_fake/state`);
});

for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => server.close(() => process.exit(0)));
