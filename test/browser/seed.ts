// Data for the browser tests' page tour: an account with something on every dashboard page, made
// through the API as a user would (users, a fixed and a tiered plan, subscriptions and so payments,
// a refund, payouts, a webhook endpoint with failed and delivered deliveries, a restricted key, a
// test clock), and the same account's live mode with what a live key can make without a processor
// (users, plans, a webhook endpoint with deliveries, a restricted key). Names and emails are long
// on purpose: the layout must hold them.
import { type Receiver, api, until } from "./harness";

export const CARD = { payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: new Date().getUTCFullYear() + 3, cvv: "123" };

export interface Seeded {
  key: string;
  liveKey: string;
  live: { endpointId: string; eventId: string; users: { id: string; name: string; email: string }[] };
  endpointId: string;
  eventId: string;
  users: { id: string; name: string; email: string }[];
  plans: { id: string; name: string }[];
  subscriptions: { id: string; user_id: string; plan_id: string }[];
  payouts: { id: string; recipient_id: string | null }[];
  payments: { id: string }[];
  /** A one-off payment authorized and not captured. */
  authorized: { id: string };
  /** A user on the seeded test clock. */
  clockedUser: { id: string };
}

async function ok(origin: string, path: string, key: string | undefined, body?: unknown, method?: string) {
  const res = await api(origin, path, key, body, method);
  if (res.status >= 300) throw new Error(`${method ?? (body === undefined ? "GET" : "POST")} ${path} answered ${res.status}: ${res.text}`);
  return res.body;
}

export async function seedAccount(origin: string, receiver: Receiver, name = "Layout Tour Holdings International"): Promise<Seeded> {
  const signup = await ok(origin, "/api/accounts", undefined, { name, email: `ops+${Date.now()}@layout.test` });
  const key: string = signup.api_key;
  const endpoint = await ok(origin, "/api/webhooks", key, { url: receiver.url, events: ["*"] });
  const clock = await ok(origin, "/api/test-clocks", key, { frozen_time: "2026-01-31T12:00:00.000Z", name: "Leap-year renewals for the annual plans" });
  const users = [];
  for (const [n, email] of [
    ["Maximiliana Theodora Featherstonehaugh-Wolfeschlegel", "maximiliana.featherstonehaugh-wolfeschlegel@subsidiary.example.com"],
    ["Grace Hopper", "grace@example.com"],
    ["Ada Lovelace", "ada@example.com"],
  ]) {
    users.push(await ok(origin, "/api/users", key, { name: n, email }));
  }
  const clockedUser = await ok(origin, "/api/users", key, { name: "Clocked User", email: "clocked@example.com", test_clock: clock.id });
  const plans = [
    await ok(origin, "/subscription-plans", key, { name: "Professional Annual Plan With Priority Support", price: 1999.99, currency: "usd", interval: "year", description: "Everything." }),
    await ok(origin, "/subscription-plans", key, {
      name: "Seats",
      currency: "usd",
      interval: "month",
      pricing_model: "graduated",
      tiers: [
        { up_to: 5, unit_price: 7 },
        { up_to: 10, unit_price: 6.5, flat_price: 10 },
        { up_to: null, unit_price: 6 },
      ],
    }),
    await ok(origin, "/subscription-plans", key, { name: "Kuwait", price: 1.234, currency: "kwd", interval: "month" }),
  ];
  const subscriptions = [];
  subscriptions.push(await ok(origin, "/subscriptions", key, { user_id: users[0].id, plan_id: plans[0].id, ...CARD }));
  subscriptions.push(await ok(origin, "/subscriptions", key, { user_id: users[1].id, plan_id: plans[1].id, quantity: 12, ...CARD }));
  subscriptions.push(await ok(origin, "/subscriptions", key, { user_id: users[2].id, plan_id: plans[2].id, ...CARD }));
  await ok(origin, `/subscriptions/${subscriptions[2].id}`, key, undefined, "DELETE");
  const payments = await ok(origin, `/payments?subscription_id=${subscriptions[0].id}`, key);
  await ok(origin, "/refunds", key, { payment_id: payments.data[0].id, amount: 12_345 });
  // A one-off authorization waiting for its capture: its page carries the capture and cancel forms.
  const authorized = await ok(origin, "/payments", key, { amount: 129_900, currency: "eur", user_id: users[0].id, capture_method: "manual", description: "Standing desk, oak, 180 × 80 cm, delivered to the third floor", ...CARD });
  const payouts = [
    await ok(origin, "/payout", key, { amount: 4200, currency: "usd", description: "Quarterly revenue share for the Northern European reseller network", recipient_id: users[0].id, ...CARD }),
    await ok(origin, "/payout", key, { amount: 1000, currency: "jpy", recipient_id: users[1].id, ...CARD }),
  ];
  await ok(origin, "/api/keys", key, { name: "reporting and reconciliation (read only)", scopes: ["users:read", "payments:read", "payouts:read", "subscriptions:read", "plans:read", "events:read"] });
  // Deliveries: the receiver answers 500 until told otherwise, so the first attempts fail.
  await until("a failed delivery attempt", async () => {
    const deliveries = await ok(origin, `/api/webhooks/${endpoint.id}/deliveries`, key);
    return deliveries.data.some((d: { attempts: unknown[] }) => d.attempts.length > 0);
  });
  receiver.accept();
  const test = await ok(origin, `/api/webhooks/${endpoint.id}/test`, key, undefined, "POST");
  await until("a delivered delivery", async () => {
    const deliveries = await ok(origin, `/api/webhooks/${endpoint.id}/deliveries?status=delivered`, key);
    return deliveries.data.length > 0;
  });
  return { key, liveKey: signup.live_api_key, live: await seedLive(origin, receiver, signup.live_api_key), endpointId: endpoint.id, eventId: test.event_id, users, plans, subscriptions, payouts, payments: payments.data, authorized, clockedUser };
}

/** Live mode has no processor here: users, plans, an endpoint with delivered events, a restricted key. */
async function seedLive(origin: string, receiver: Receiver, liveKey: string): Promise<Seeded["live"]> {
  const endpoint = await ok(origin, "/api/webhooks", liveKey, { url: receiver.url, events: ["*"] });
  const users = [];
  for (const [n, email] of [
    ["Bartholomew Livingstone-Montgomery of the Live Accounts Department", "bartholomew.livingstone-montgomery@live-accounts.example.com"],
    ["Liv Livemode", "liv@example.com"],
  ]) {
    users.push(await ok(origin, "/api/users", liveKey, { name: n, email }));
  }
  await ok(origin, "/subscription-plans", liveKey, { name: "Live Professional Annual Plan With Priority Support", price: 1999.99, currency: "usd", interval: "year" });
  await ok(origin, "/api/keys", liveKey, { name: "live reporting (read only)", scopes: ["users:read", "payments:read", "payouts:read", "events:read"] });
  const test = await ok(origin, `/api/webhooks/${endpoint.id}/test`, liveKey, undefined, "POST");
  await until("a delivered live delivery", async () => {
    const deliveries = await ok(origin, `/api/webhooks/${endpoint.id}/deliveries?status=delivered`, liveKey);
    return deliveries.data.length > 1;
  });
  return { endpointId: endpoint.id, eventId: test.event_id, users };
}
