// Request ids (endpoint 1 of the interface document): a UUIDv7 for a purpose, stored with its
// metadata; create, list and read.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { requestIds } from "../../db/schema";
import { listOwned, readById } from "../reads";
import { uuidv7 } from "../../domain/ids";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { invalidRequest } from "../../lib/errors";
import { listQuery, listSchema } from "../pagination";
import { commitAndRespond } from "../write-path";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { CreateRequestIdBody, RequestIdSchema, serializeRequestId } from "./schema";
import { z } from "@hono/zod-openapi";

const tags = ["Request ids"];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const create = apiRoute({
  method: "post",
  path: "/api/request-id",
  tags,
  operationId: "createRequestId",
  summary: "Generate a unique id",
  description: "Generates a UUIDv7 for the stated purpose and stores it, readable later by id.",
  scope: "request_ids:write",
  request: jsonBodyOf(CreateRequestIdBody),
  responses: { 201: json(RequestIdSchema, "The generated id.") },
});

const list = apiRoute({
  method: "get",
  path: "/api/request-id",
  tags,
  operationId: "listRequestIds",
  summary: "List generated ids",
  scope: "request_ids:read",
  request: { query: listQuery },
  responses: { 200: json(listSchema(RequestIdSchema, "RequestIdList"), "A page of ids, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/api/request-id/{id}",
  tags,
  operationId: "getRequestId",
  summary: "Read a generated id",
  scope: "request_ids:read",
  request: {
    params: z.object({ id: z.string({ error: "id must be a generated id (a UUID), of at most 100 characters." }).max(100).openapi({ param: { name: "id", in: "path" }, example: "019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b" }) }),
  },
  responses: { 200: json(RequestIdSchema, "The id and its purpose.") },
});

export function registerRequestIds(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createRequestId(c) {
    const body = c.req.valid("json");
    // zod leaves a "__proto__" key out of a record (it cannot be plain data on an object), so it
    // would vanish from the stored metadata; refuse it instead of dropping it silently.
    const sent = (c.var.jsonBody as { metadata?: unknown } | undefined)?.metadata;
    if (typeof sent === "object" && sent !== null && Object.hasOwn(sent, "__proto__")) {
      throw invalidRequest("parameter_invalid", "metadata.__proto__: this key name is reserved; use another.", "metadata.__proto__");
    }
    const now = clock.now();
    const row = {
      id: uuidv7(now),
      accountId: c.var.auth.accountId,
      livemode: c.var.auth.livemode,
      purpose: body.purpose,
      metadata: body.metadata ?? null,
      createdAt: isoTime(now),
    };
    return commitAndRespond(c, { statements: [c.var.db.insert(requestIds).values(row)] }, 201, serializeRequestId(row));
  });

  app.openapi(list, async function listRequestIds(c) {
    const page = await listOwned(c, {
      table: requestIds,
      query: c.req.valid("query"),
      validCursor: (id) => UUID.test(id),
      serialize: serializeRequestId,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getRequestId(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, requestIds, id, "request id");
    return c.json(serializeRequestId(row), 200);
  });
}
