// Test clocks (test mode only): a user created with a test clock has its subscriptions billed by
// the clock's frozen time instead of the wall clock. Advancing the clock runs, in time order,
// every renewal and dunning retry that falls due up to the new time.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import { createMiddleware } from "hono/factory";
import { enqueueJobs } from "../../jobs";
import { MAX_ADVANCE_INTERVALS, maxAdvanceTime, runTestClock, TEST_CLOCK_SYNC_STEPS, testClockHasDueWork } from "../../billing/test-clocks";
import { guardExists } from "../../db/batch";
import { testClocks } from "../../db/schema";
import { ownedBy } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { ApiError, conflict, invalidRequest } from "../../lib/errors";
import { listQuery, listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { commit, commitAndRespond, restoreAnswer } from "../write-path";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { AdvanceTestClockBody, CreateTestClockBody, serializeTestClock, TestClockSchema } from "./schema";

const tags = ["Test clocks"];
const clockId = idParam("test clock", "clock_01jd2x4k5m6n7p8q9r0s1t2v3w");

/** Test clocks simulate time for the sandbox; a live credential may not touch them. */
const testModeOnly = createMiddleware<AppEnv>(async (c, next) => {
  if (c.var.auth.mode === "live") {
    throw new ApiError(403, "permission_error", "livemode_not_allowed", "Test clocks exist in test mode only; use a test-mode key (sk_test_…).");
  }
  return next();
});

const create = apiRoute({
  method: "post",
  path: "/api/test-clocks",
  tags,
  operationId: "createTestClock",
  summary: "Create a test clock",
  description: "Test mode only. Attach users to it with POST /api/users { test_clock }.",
  scope: "test_clocks:write",
  middleware: [testModeOnly],
  request: jsonBodyOf(CreateTestClockBody),
  responses: { 201: json(TestClockSchema, "The new clock.") },
});

const list = apiRoute({
  method: "get",
  path: "/api/test-clocks",
  tags,
  operationId: "listTestClocks",
  summary: "List test clocks",
  scope: "test_clocks:read",
  middleware: [testModeOnly],
  request: { query: listQuery },
  responses: { 200: json(listSchema(TestClockSchema, "TestClockList"), "A page of clocks, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/api/test-clocks/{id}",
  tags,
  operationId: "getTestClock",
  summary: "Read a test clock",
  scope: "test_clocks:read",
  middleware: [testModeOnly],
  request: { params: clockId },
  responses: { 200: json(TestClockSchema, "The clock.") },
});

const advance = apiRoute({
  method: "post",
  path: "/api/test-clocks/{id}/advance",
  claimFirst: true,
  tags,
  operationId: "advanceTestClock",
  summary: "Advance a test clock",
  description:
    `Moves the clock forward and runs, in time order, each renewal and dunning retry of its users' subscriptions that falls due up to the new time, each at the moment it falls due. One advance may move the clock at most ${MAX_ADVANCE_INTERVALS} intervals of the shortest subscription on it (as Stripe's test clocks); further answers 400 frozen_time_too_far. Up to ${TEST_CLOCK_SYNC_STEPS} renewals run within the request; the rest continue in the background while the clock's status is advancing.`,
  scope: "test_clocks:write",
  middleware: [testModeOnly],
  request: { params: clockId, ...jsonBodyOf(AdvanceTestClockBody) },
  responses: { 200: json(TestClockSchema, "The clock at its new time.") },
});

const CLOCK_MOVED = "test_clock_moved";

export function registerTestClocks(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createTestClock(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const row = {
      id: newId("testClock", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      name: body.name ?? null,
      frozenTime: isoTime(Date.parse(body.frozen_time)),
      createdAt: isoTime(now),
    };
    return commitAndRespond(c, { statements: [db.insert(testClocks).values(row)] }, 201, serializeTestClock(row, "ready"));
  });

  app.openapi(list, async function listTestClocks(c) {
    const { db } = c.var;
    const page = await listOwned(c, {
      table: testClocks,
      query: c.req.valid("query"),
      validCursor: (id) => hasPrefix(id, "testClock"),
      serialize: (row: typeof testClocks.$inferSelect) => row,
    });
    const statuses = await Promise.all(page.data.map((clock) => testClockHasDueWork(db, clock)));
    return c.json({ ...page, data: page.data.map((clock, i) => serializeTestClock(clock, statuses[i] ? "advancing" : "ready")) }, 200);
  });

  app.openapi(get, async function getTestClock(c) {
    const { id } = c.req.valid("param");
    const { db } = c.var;
    const clock = await readById(c, testClocks, id, "test clock");
    return c.json(serializeTestClock(clock, (await testClockHasDueWork(db, clock)) ? "advancing" : "ready"), 200);
  });

  app.openapi(advance, async function advanceTestClock(c) {
    const { id } = c.req.valid("param");
    const { db, auth } = c.var;
    const target = Date.parse(c.req.valid("json").frozen_time);
    const clock = await readById(c, testClocks, id, "test clock");
    if (target <= Date.parse(clock.frozenTime)) {
      throw invalidRequest("frozen_time_not_forward", `frozen_time must be after the clock's current time, ${clock.frozenTime}.`, "frozen_time");
    }
    const limit = await maxAdvanceTime(db, clock);
    if (limit !== null && target > limit) {
      throw invalidRequest(
        "frozen_time_too_far",
        `One advance may move the clock at most ${MAX_ADVANCE_INTERVALS} intervals of the shortest subscription on it: up to ${isoTime(limit)}. Advance in steps.`,
        "frozen_time",
      );
    }
    const moved = { ...clock, frozenTime: isoTime(target) };
    const match = and(eq(testClocks.id, id), ownedBy(testClocks, auth), eq(testClocks.frozenTime, clock.frozenTime));
    // Compare-and-set on the time read, so two concurrent advances cannot interleave. The batch
    // stores the answer as of the move ("advancing"), so a retry after a lost answer replays it.
    await commit(
      c,
      {
        statements: [
          guardExists(db, CLOCK_MOVED, testClocks, match),
          db.update(testClocks).set({ frozenTime: moved.frozenTime }).where(match),
        ],
      },
      200,
      serializeTestClock(moved, "advancing"),
      { failures: { [CLOCK_MOVED]: () => conflict("test_clock_moved", "The clock was moved by another request meanwhile; read it and retry.") } },
    );
    // The renewals run after the new time is committed; the answer shows whether they all ran in
    // this request (and the stored answer is brought up to it).
    let done = false;
    try {
      ({ done } = await runTestClock(c.env, db, moved, TEST_CLOCK_SYNC_STEPS));
    } catch (error) {
      // The clock has moved; the job queue finishes what this request could not.
      console.error(JSON.stringify({ message: "test clock renewals failed in the request; continuing on the job queue", test_clock: id, error: String(error) }));
    }
    if (!done) await enqueueJobs(c.env.JOB_QUEUE, [{ kind: "billing.advance_test_clock", testClockId: id }]);
    const answer = serializeTestClock(moved, done ? "ready" : "advancing");
    if (done) await restoreAnswer(c, 200, answer);
    return c.json(answer, 200);
  });
}
