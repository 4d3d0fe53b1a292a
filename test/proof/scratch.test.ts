import { it } from "vitest";
import { call, signup } from "../helpers";
it("probe", async () => {
  const a = await signup();
  const show = (label: string, r: any) => console.log("PROBE", label, r.status, JSON.stringify([...r.headers]).slice(0, 200), r.text.slice(0, 200));
  for (const m of ["PATCH", "OPTIONS", "HEAD", "PUT", "DELETE", "TRACE", "PROPFIND"]) {
    try { show(m + " /api/users", await call("/api/users", { key: a.key, method: m })); } catch (e) { console.log("PROBE", m, "threw", String(e)); }
  }
  show("HEAD /api/users/x", await call("/api/users/x", { key: a.key, method: "HEAD" }));
  show("HEAD /health", await call("/health", { method: "HEAD" }));
  show("long auth", await call("/api/users", { headers: { authorization: "Bearer " + "a".repeat(100_000) } }));
  show("latin1 auth", await call("/api/users", { headers: { authorization: "Bearer \u00e9\u00e9" } }));
  show("double slash", await call("//api/users", { key: a.key }));
  show("trailing slash", await call("/api/users/", { key: a.key }));
  show("case", await call("/API/USERS", { key: a.key }));
  show("encoded path", await call("/api/%75sers", { key: a.key }));
  show("dot segs", await call("/api/users/../keys", { key: a.key }));
  show("oauth basic bad b64", await call("/oauth/token", { body: { grant_type: "client_credentials" }, headers: { authorization: "Basic %%%" } }));
  show("oauth basic no colon", await call("/oauth/token", { body: { grant_type: "client_credentials" }, headers: { authorization: "Basic " + btoa(a.key) } }));
  show("oauth basic pct", await call("/oauth/token", { body: { grant_type: "client_credentials" }, headers: { authorization: "Basic " + btoa("x:%E0%A4%A") } }));
  show("oauth scope weird", await call("/oauth/token", { body: { grant_type: "client_credentials", scope: "__proto__ constructor" }, headers: { authorization: "Bearer " + a.key } }));
  show("oauth form dup", await call("/oauth/token", { rawBody: "grant_type=client_credentials&grant_type=x&scope=users:read", headers: { authorization: "Bearer " + a.key, "content-type": "application/x-www-form-urlencoded" } }));
  show("oauth form proto", await call("/oauth/token", { rawBody: "__proto__=x&grant_type=client_credentials", headers: { authorization: "Bearer " + a.key, "content-type": "application/x-www-form-urlencoded" } }));
  show("keys scopes proto", await call("/api/keys", { key: a.key, body: { name: "x", scopes: ["__proto__", "constructor"] } }));
  show("keys scopes dup", await call("/api/keys", { key: a.key, body: { name: "x", scopes: Array(10000).fill("users:read") } }));
  show("cancel sub q", await call("/subscriptions/sub_x?at_period_end=maybe", { key: a.key, method: "DELETE" }));
  show("deliveries bad status", await call("/api/webhooks/whk_x/deliveries?status=__proto__", { key: a.key }));
  show("events type", await call("/api/events?type=" + "x".repeat(200), { key: a.key }));
  show("ct charset", await call("/api/users", { key: a.key, rawBody: '{"name":"a","email":"a@b.co"}', headers: { "content-type": "application/json; charset=utf-16" } }));
  show("ct vendor", await call("/api/users", { key: a.key, rawBody: '{"name":"a","email":"a@b.co"}', headers: { "content-type": "application/vnd.api+json" } }));
  show("ct weird", await call("/api/users", { key: a.key, rawBody: '{"name":"a","email":"a@b.co"}', headers: { "content-type": "application/json\u000b" } }));
  show("invalid utf8", await call("/api/users", { key: a.key, rawBody: new Uint8Array([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), headers: { "content-type": "application/json" } }));
});
