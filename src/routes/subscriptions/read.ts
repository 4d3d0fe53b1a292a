// GET /subscriptions and GET /subscriptions/{id}.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { subscriptions } from "../../db/schema";
import { hasPrefix } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { listQuery, listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { apiRoute, json } from "../openapi";
import { subscriptionId, tags } from "./common";
import { ListSubscriptionsQuery, SubscriptionSchema, serializeSubscription } from "./schema";

const list = apiRoute({
  method: "get",
  path: "/subscriptions",
  tags,
  operationId: "listSubscriptions",
  summary: "List subscriptions",
  scope: "subscriptions:read",
  request: { query: listQuery.extend(ListSubscriptionsQuery) },
  responses: { 200: json(listSchema(SubscriptionSchema, "SubscriptionList"), "A page of subscriptions, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/subscriptions/{id}",
  tags,
  operationId: "getSubscription",
  summary: "Read a subscription",
  scope: "subscriptions:read",
  request: { params: subscriptionId },
  responses: { 200: json(SubscriptionSchema, "The subscription.") },
});

export function registerReadSubscriptions(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async function listSubscriptions(c) {
    const query = c.req.valid("query");
    const page = await listOwned(c, {
      table: subscriptions,
      query,
      filters: [
        [subscriptions.userId, query.user_id],
        [subscriptions.status, query.status],
      ],
      validCursor: (id) => hasPrefix(id, "subscription"),
      serialize: serializeSubscription,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getSubscription(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, subscriptions, id, "subscription");
    return c.json(serializeSubscription(row), 200);
  });
}
