// Coupons: create, list, read and delete (which stops new redemptions; subscriptions that hold a
// discount keep it). Redemption is src/billing/coupons.ts, from the subscription routes.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { type SQL, and, asc, desc, eq, gt, lt, sql } from "drizzle-orm";
import { guardExists } from "../../db/batch";
import { coupons } from "../../db/schema";
import { owned } from "../../db/scope";
import { type CouponRow, serializeCoupon } from "../../billing/coupons";
import { parseAmountOff, parseCouponDuration, parsePercentOff } from "../../domain/discounts";
import { newId } from "../../domain/ids";
import { readCurrency } from "../../payments/money-input";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { conflict, invalidRequest, notFound } from "../../lib/errors";
import { listQuery, listSchema, paginate } from "../pagination";
import { readOne, withLiveKey } from "../reads";
import { commitAndAnswerRow, commitAndRespond } from "../write-path";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { futureInstant } from "../shared";
import { rowAnswer } from "../../middleware/stored-answers";
import { COUPON_ID_PATTERN, CouponSchema, CreateCouponBody } from "./schema";

const tags = ["Coupons"];
const couponId = idParam("coupon", "SUMMER20");

const create = apiRoute({
  method: "post",
  path: "/coupons",
  tags,
  operationId: "createCoupon",
  summary: "Create a coupon",
  description:
    "A percentage (percent_off) or an amount (amount_off with its currency) off a subscription's invoices, for one invoice, N months or forever. A subscription redeems it with `coupon` on create or update. Its value and duration never change. The percentage is rounded once per invoice, half away from zero, and a discount never takes a total below zero.",
  scope: "coupons:write",
  request: jsonBodyOf(CreateCouponBody),
  responses: { 201: json(CouponSchema, "The new coupon.") },
  extraErrors: [409],
});

const list = apiRoute({
  method: "get",
  path: "/coupons",
  tags,
  operationId: "listCoupons",
  summary: "List coupons",
  description: "Coupons, newest first, deleted ones included (their deleted_at is set).",
  scope: "coupons:read",
  request: { query: listQuery },
  responses: { 200: json(listSchema(CouponSchema, "CouponList"), "A page of coupons, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/coupons/{id}",
  tags,
  operationId: "getCoupon",
  summary: "Read a coupon",
  scope: "coupons:read",
  request: { params: couponId },
  responses: { 200: json(CouponSchema, "The coupon.") },
});

const remove = apiRoute({
  method: "delete",
  path: "/coupons/{id}",
  tags,
  operationId: "deleteCoupon",
  summary: "Delete a coupon",
  description: "Stops new redemptions: the coupon stays readable (valid false, deleted_at set), its id stays taken, and subscriptions that redeemed it keep their discount.",
  scope: "coupons:write",
  request: { params: couponId },
  responses: { 200: json(CouponSchema, "The deleted coupon.") },
});

const COUPON_MISSING = "coupon_missing";
const couponAnswer = rowAnswer("coupon", coupons, (row) => serializeCoupon(row), []);

export function registerCoupons(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createCoupon(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const refuse = (param: string) => (r: { message: string }) => invalidRequest("parameter_invalid", r.message, param);

    // Each field sent is checked first, then how they go together.
    const percent = body.percent_off === undefined ? null : parsePercentOff(body.percent_off);
    if (percent && !percent.ok) throw refuse("percent_off")(percent);
    const amount = body.amount_off === undefined ? null : parseAmountOff(body.amount_off, body.currency === undefined ? "usd" : readCurrency(body.currency));
    if (amount && !amount.ok) throw refuse("amount_off")(amount);
    if ((percent === null) === (amount === null)) {
      throw invalidRequest("parameter_missing", "Give percent_off or amount_off (with currency), exactly one of them.", percent === null ? "percent_off" : "amount_off");
    }
    let percentOffBasisPoints: number | null = null;
    let amountOff: number | null = null;
    let currency: string | null = null;
    if (percent?.ok) {
      if (body.currency !== undefined) throw invalidRequest("parameter_unexpected", "currency: only an amount_off coupon has a currency.", "currency");
      percentOffBasisPoints = percent.basisPoints;
    } else if (amount?.ok) {
      if (body.currency === undefined) throw invalidRequest("parameter_missing", "currency is required with amount_off.", "currency");
      amountOff = amount.value.amountOff;
      currency = amount.value.currency;
    }
    const duration = parseCouponDuration(body.duration, body.duration_in_months);
    if (!duration.ok) throw invalidRequest(duration.reason === "duration_invalid" ? "parameter_invalid" : duration.reason === "months_required" ? "parameter_missing" : "parameter_unexpected", duration.message, "duration_in_months");
    // redeem_by is a real date: the wall clock, not a test clock's.
    const redeemBy = body.redeem_by === undefined ? null : isoTime(futureInstant(body.redeem_by, "redeem_by", now));
    const pk = newId("coupon", now);
    const id = body.id ?? pk;
    const row: CouponRow = {
      pk,
      id,
      accountId: auth.accountId,
      livemode: auth.livemode,
      name: body.name,
      percentOffBasisPoints,
      amountOff,
      currency,
      duration: duration.value.duration,
      durationInMonths: duration.value.duration === "repeating" ? duration.value.durationInMonths : null,
      maxRedemptions: body.max_redemptions ?? null,
      redeemBy,
      timesRedeemed: 0,
      valid: true,
      createdAt: isoTime(now),
      updatedAt: isoTime(now),
      deletedAt: null,
    };
    return commitAndRespond(c, { statements: [db.insert(coupons).values(row)] }, 201, serializeCoupon(row, now), {
      failures: { "unique:coupons.account_id, coupons.livemode, coupons.id": () => conflict("coupon_exists", `A coupon with id ${id} already exists (deleted coupons keep their id).`) },
    });
  });

  app.openapi(list, async function listCoupons(c) {
    const { auth } = c.var;
    const query = c.req.valid("query");
    // Newest first by the time-ordered pk; a cursor is a coupon's id, read as its pk.
    const pkOf = (id: string) => sql`(SELECT pk FROM ${coupons} WHERE ${owned(coupons, auth, eq(coupons.id, id))})`;
    const page = await paginate({
      query,
      validCursor: (id) => COUPON_ID_PATTERN.test(id),
      serialize: (row: CouponRow) => serializeCoupon(row),
      fetch: async (direction, cursor, limit) => {
        const where = owned(
          coupons,
          auth,
          direction === "after" ? lt(coupons.pk, pkOf(cursor as string)) : undefined,
          direction === "before" ? gt(coupons.pk, pkOf(cursor as string)) : undefined,
        );
        const order = direction === "before" ? asc(coupons.pk) : desc(coupons.pk);
        return withLiveKey(c, c.var.db.select().from(coupons).where(where).orderBy(order).limit(limit));
      },
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getCoupon(c) {
    const { id } = c.req.valid("param");
    const row = await readOne(c, c.var.db.select().from(coupons).where(owned(coupons, c.var.auth, eq(coupons.id, id))).limit(1), "coupon", id);
    return c.json(serializeCoupon(row), 200);
  });

  app.openapi(remove, async function deleteCoupon(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const now = isoTime(clock.now());
    const match = owned(coupons, auth, eq(coupons.id, id));
    return commitAndAnswerRow(
      c,
      {
        statements: [guardExists(db, COUPON_MISSING, coupons, match)],
        // Deleting twice answers the coupon as the first delete left it.
        returning: db
          .update(coupons)
          .set({ valid: false, deletedAt: sql`COALESCE(${coupons.deletedAt}, ${now})`, updatedAt: now })
          .where(match)
          .returning(),
      },
      couponAnswer,
      and(eq(coupons.accountId, auth.accountId), eq(coupons.livemode, auth.livemode), eq(coupons.id, id)) as SQL,
      { failures: { [COUPON_MISSING]: () => notFound("coupon", id, "id") } },
    );
  });
}
