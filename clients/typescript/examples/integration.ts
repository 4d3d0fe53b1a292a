import { Tender, webhooks, type TenderOptions } from "@tender/client";

export async function payVendor(options: TenderOptions) {
  const tender = new Tender(options); // { apiKey: "sk_test_…", baseUrl?, fetch? }
  const user = await tender.POST("/api/users", { body: { name: "Ada Lovelace", email: "ada@example.com" } });
  const card = { payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: 2035, cvv: "123" } as const;
  const payout = await tender.POST("/payout", { body: { recipient_id: user.id, amount: 5000, currency: "usd", description: "Invoice 1042", ...card } });
  return { user, payout }; // payout.status is "pending"; payout.paid follows by webhook
}

// Your webhook route, given the raw request and the endpoint's secret (whsec_…).
export async function onWebhook(request: Request, secret: string): Promise<Response> {
  const event = await webhooks.verify(await request.text(), request.headers, secret).catch(() => null);
  if (!event) return new Response("Invalid signature", { status: 400 });
  if (event.type === "payout.paid") console.log(`paid ${event.data.amount} ${event.data.currency} to ${event.data.recipient_id}`);
  return new Response(null, { status: 204 });
}
