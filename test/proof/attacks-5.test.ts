// Fifth-round attacks, on the issue 19 fixes: hostile input (card numbers hidden in every way a
// caller can hide one, in bodies, keys, form bodies, query strings and headers), API versions
// against data shaped like the API's own objects, the commit-ordered events feed under many
// writers and other tenants' cursors. (Its attacks on `tender listen` with a secret from the
// environment run in Node with the CLI's other tests, test/node/cli.test.ts: the CLI reads its
// arguments with node:util's parseArgs, which workerd lacks.)
// Each test asserts the correct behaviour against the real local D1; a defect found has its fix
// in src/ and its test failed before it (see the report of this round).
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { containsCardNumber, luhnValid } from "../../src/domain/cards";
import { type Account, type CallResult, call, expectError, signup } from "../support/http";
import { CARDS, captureLogs, cardFields, expectNoCardData, sentPans } from "../support/cards";
import { countRows } from "../support/db";
import { createPlan, createUser, subscribed } from "../support/fixtures";

/** A 19-digit Visa number that passes Luhn. */
const VISA_19 = (() => {
  const body = "400000000000000000";
  for (let d = 0; d <= 9; d++) if (luhnValid(`${body}${d}`)) return `${body}${d}`;
  throw new Error("no check digit");
})();

let acct: Account;

beforeAll(async () => {
  acct = await signup("Attacks 5");
  for (const pan of [CARDS.visa, CARDS.mastercard, CARDS.amex, VISA_19]) sentPans.add(pan);
});

afterAll(async () => {
  // No PAN sent in this file is in the database, in ASCII digits, anywhere.
  await expectNoCardData();
});

const rows = (table: string) => countRows(table, "account_id = ?", acct.id);

/** Every digit of `pan` written in another Unicode script whose digits run 0..9 from `zero`. */
const inScript = (pan: string, zero: number) => [...pan].map((d) => String.fromCodePoint(zero + Number(d))).join("");
const groupsOf = (pan: string, sep: string) => pan.match(/.{1,4}/g)!.join(sep);

/**
 * Card numbers as a person or a hostile caller can write them, each of which a reader (or a
 * regular expression over the stored text, after NFKC) reads back as the PAN.
 */
const HIDDEN: [string, string][] = [
  ["fullwidth digits", inScript(CARDS.visa, 0xff10)],
  ["Arabic-Indic digits", inScript(CARDS.visa, 0x0660)],
  ["Devanagari digits", inScript(CARDS.mastercard, 0x0966)],
  ["mathematical bold digits", inScript(CARDS.visa, 0x1d7ce)],
  ["fullwidth amex, grouped", inScript("3782", 0xff10) + " " + inScript("822463", 0xff10) + " " + inScript("10005", 0xff10)],
  ["no-break spaces", groupsOf(CARDS.visa, "\u00a0")],
  ["narrow no-break spaces", groupsOf(CARDS.visa, "\u202f")],
  ["zero-width spaces", groupsOf(CARDS.visa, "\u200b")],
  ["a zero-width space between every digit", [...CARDS.visa].join("\u200b")],
  ["soft hyphens", groupsOf(CARDS.mastercard, "\u00ad")],
  ["en dashes", groupsOf(CARDS.visa, "\u2013")],
  ["dots", groupsOf(CARDS.visa, ".")],
  ["underscores", groupsOf(CARDS.visa, "_")],
  ["two spaces", groupsOf(CARDS.visa, "  ")],
  ["space, dash, space", groupsOf(CARDS.visa, " - ")],
  ["tabs", groupsOf(CARDS.visa, "\t")],
  ["new lines", groupsOf(CARDS.visa, "\n")],
  ["then the expiry and CVV", `${CARDS.visa} 12 27 123`],
  ["grouped, then the CVV", `${groupsOf(CARDS.visa, " ")} 123`],
  ["grouped, then the expiry", `card ${groupsOf(CARDS.mastercard, " ")} 12/27`],
];

describe("hostile input: a card number hidden in a body", () => {
  it("each hidden form, in a value or in a key, at any depth, answers 400 card_number_in_text, stores nothing and does not echo it", async () => {
    const before = { ids: await rows("request_ids"), records: await countRows("idempotency_keys", "account_id = ?", acct.id) };
    const stored: string[] = [];
    for (const [i, [how, text]] of HIDDEN.entries()) {
      for (const [where, body, param] of [
        ["purpose", { purpose: text }, "purpose"],
        ["metadata value", { purpose: "x", metadata: { note: text } }, "metadata.note"],
        ["metadata key", { purpose: "x", metadata: { [text.slice(0, 40)]: "x" } }, "metadata"],
        ["deep", { purpose: "x", deep: [{ a: [[{ b: text }]] }] }, "deep.0.a.0.0.b"],
      ] as [string, unknown, string][]) {
        if (where === "metadata key" && text.length > 40) continue;
        const res = await call("/api/request-id", { key: acct.key, body, idempotencyKey: `hidden-${i}-${where.replaceAll(" ", "-")}` });
        if (res.status !== 400 || res.body.error?.code !== "card_number_in_text") {
          stored.push(`${how} in ${where}: ${res.status} ${res.body.error?.code ?? ""}`);
          continue;
        }
        expect(res.body.error.param, `${how} in ${where}`).toBe(param);
        expect(res.text, `${how} in ${where}: the answer does not repeat it`).not.toContain(JSON.stringify(text).slice(1, -1));
      }
    }
    expect(stored, "hidden card numbers that were accepted").toEqual([]);
    expect(await rows("request_ids")).toBe(before.ids);
    expect(await countRows("idempotency_keys", "account_id = ?", acct.id)).toBe(before.records);
  });

  it("a card number as a JSON number in every notation (exponent, decimal, negative, 19 digits, past 2^53) is refused", async () => {
    const before = await rows("request_ids");
    const numbers = [
      CARDS.visa,
      "4.242424242424242e15",
      "4.242424242424242E+15",
      "0.4242424242424242e16",
      "42424242424242420e-1",
      "4242424242424242e0",
      "4242424242424242.0",
      "4242424242424242.5",
      "-4242424242424242",
      "-5.555555555554444e15",
      VISA_19,
      `${VISA_19}.000`,
      "3.78282246310005e14",
    ];
    for (const n of numbers) {
      for (const text of [`{"purpose":"x","metadata":{"n":${n}}}`, `{"purpose":"x","list":[[[${n}]]]}`, `{"purpose":"x","metadata":{"amount":${n}}}`]) {
        const res = await call("/api/request-id", { key: acct.key, rawBody: text, headers: { "content-type": "application/json" } });
        expectError(res, 400, "invalid_request_error", "card_number_in_text");
      }
    }
    expect(await rows("request_ids")).toBe(before);
  });

  it("everyday text still passes: IBANs, phone numbers, dates, versions, long references, amounts, UUIDs", async () => {
    const texts = [
      "DE89 3704 0044 0532 0130 00",
      "DE44 5001 0517 5407 3249 31",
      "GB29 NWBK 6016 1331 9268 19",
      "FR76 3000 6000 0112 3456 7890 189",
      "+1 415-555-0132",
      "+44 20 7946 0958",
      "2026-11-22 10:30:00.123",
      "v10.0.19045.2965",
      "1234567890123456789012345",
      "ref 1234 5678 9012 3456 7890",
      "4242 4242 4242",
      "4242 4242 4242 4241",
      "total 1.234.567,89 EUR",
      "019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b",
      "card ending ４２４２",
    ];
    for (const text of texts) {
      const res = await call("/api/request-id", { key: acct.key, body: { purpose: "everyday", metadata: { text } } });
      expect(res.status, `${text}: ${res.text}`).toBe(201);
    }
  });

  it("containsCardNumber sees what NFKC and Unicode digits make of a PAN, and nothing in text without one", () => {
    for (const [how, text] of HIDDEN) expect(containsCardNumber(text), how).toBe(true);
    expect(containsCardNumber("№ ４２４２ ４２４２")).toBe(false);
    expect(containsCardNumber("Übergröße, naïve café")).toBe(false);
  });
});

describe("hostile input: a card number outside the JSON body", () => {
  it("an Idempotency-Key holding a card number is refused (400 card_number_in_text) and never stored, nor sent to the processor as a reference", async () => {
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    for (const key of [CARDS.visa, `order-${CARDS.mastercard}`, groupsOf(CARDS.visa, "-"), `${CARDS.visa}.retry`]) {
      const res = await call("/api/request-id", { key: acct.key, body: { purpose: "keyed" }, idempotencyKey: key });
      const error = expectError(res, 400, "invalid_request_error", "card_number_in_text");
      expect(error.param).toBe("Idempotency-Key");
      const first = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa, "739") }, idempotencyKey: key });
      expectError(first, 400, "invalid_request_error", "card_number_in_text");
    }
    // Nothing holds the key: not the idempotency records, not a payment's processor reference.
    expect(await countRows("idempotency_keys", "account_id = ? AND (key LIKE ? OR key LIKE ?)", acct.id, `%${CARDS.visa.slice(0, 12)}%`, `%4242-4242%`)).toBe(0);
    expect(await countRows("payments", "account_id = ? AND (charge_reference LIKE ? OR charge_reference LIKE ?)", acct.id, `%${CARDS.visa.slice(0, 12)}%`, `%4242-4242%`)).toBe(0);
  });

  it("a Tender-Version, a cursor, a path id or a closed-set filter holding a card number is refused without repeating it", async () => {
    const logs = captureLogs();
    const echoed: string[] = [];
    try {
      const answers: [string, CallResult][] = [
        ["Tender-Version", await call("/api/users", { key: acct.key, headers: { "tender-version": CARDS.visa } })],
        ["starting_after", await call(`/api/users?starting_after=${CARDS.visa}`, { key: acct.key })],
        ["ending_before (events)", await call(`/api/events?ending_before=${CARDS.visa}`, { key: acct.key })],
        ["path id", await call(`/subscriptions/${CARDS.visa}`, { key: acct.key })],
        ["path id (request id)", await call(`/api/request-id/${CARDS.mastercard}`, { key: acct.key })],
        ["type filter", await call(`/api/events?type=${CARDS.visa}`, { key: acct.key })],
        ["object_id filter", await call(`/api/events?object_id=${CARDS.visa}`, { key: acct.key })],
        ["unknown query parameter", await call(`/api/users?${CARDS.visa}=1`, { key: acct.key })],
        ["Tender-Consistency", await call("/api/users", { key: acct.key, headers: { "tender-consistency": CARDS.visa } })],
        ["fullwidth path id", await call(`/subscriptions/${encodeURIComponent(inScript(CARDS.visa, 0xff10))}`, { key: acct.key })],
        ["unknown route", await call(`/payments/${CARDS.visa}/capture`, { key: acct.key })],
        ["unknown route, no credential", await call(`/${groupsOf(CARDS.visa, "-")}`)],
        ["dashboard path", await call(`/dashboard/${CARDS.visa}`)],
        ["bearer credential", await call("/api/users", { key: CARDS.visa })],
      ];
      for (const [where, res] of answers) {
        expect(res.status, `${where}: ${res.text}`).toBeGreaterThanOrEqual(200);
        for (const pan of [CARDS.visa, CARDS.mastercard, inScript(CARDS.visa, 0xff10), groupsOf(CARDS.visa, "-")]) if (res.text.includes(pan)) echoed.push(where);
      }
      expect(echoed, "answers that repeat the card number").toEqual([]);
      logs.expectNoCardData();
    } finally {
      logs.restore();
    }
  });

  it("a form body to /oauth/token is scanned like a JSON one: a card number in any parameter is refused and not repeated", async () => {
    for (const form of [
      `grant_type=client_credentials&scope=${CARDS.visa}`,
      `grant_type=client_credentials&scope=users%3Aread+${CARDS.visa}`,
      `grant_type=client_credentials&client_id=${CARDS.mastercard}`,
      `grant_type=${CARDS.visa}`,
      `grant_type=client_credentials&${CARDS.visa}=x`,
    ]) {
      const res = await call("/oauth/token", { rawBody: form, headers: { authorization: `Bearer ${acct.key}`, "content-type": "application/x-www-form-urlencoded" } });
      expectError(res, 400, "invalid_request_error", "card_number_in_text");
      expect(res.text).not.toContain(CARDS.visa);
      expect(res.text).not.toContain(CARDS.mastercard);
    }
    // The JSON form of the same request answers the same.
    const json = await call("/oauth/token", { body: { grant_type: "client_credentials", scope: CARDS.visa }, headers: { authorization: `Bearer ${acct.key}` } });
    expectError(json, 400, "invalid_request_error", "card_number_in_text");
    expect(await countRows("access_tokens", "account_id = ?", acct.id)).toBe(0);
  });

  it("the card fields of a route that takes a card still take any of these forms as a card, and keep only brand and last 4", async () => {
    const user = await createUser(acct, { name: "Card Holder" });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id, groupsOf(CARDS.visa, " "));
    expect(sub.card).toMatchObject({ brand: "visa", last4: "4242" });
  });
});

describe("API versions against data shaped like the API's own objects", () => {
  const EVENT_LIKE = { object: "event", object_id: "usr_x", sequence: 7, type: "customer.created", id: "evt_x" };
  const LIST_LIKE = { object: "list", data: "event", has_more: false, sequence: 1, object_id: "x" };

  it("metadata shaped like an event or a list of events reads back unchanged in every version, and for an account pinned to the oldest", async () => {
    const { API_VERSIONS } = await import("../../src/domain/api-versions");
    const owner = await signup("Versions");
    for (const [n, metadata] of [EVENT_LIKE, LIST_LIKE].entries()) {
      const created = await call("/api/request-id", { key: owner.key, body: { purpose: "event-like", metadata }, idempotencyKey: `shape-${n}` });
      expect(created.status, created.text).toBe(201);
      for (const { version } of API_VERSIONS) {
        const headers = { "tender-version": version };
        const answers = [
          await call(`/api/request-id/${created.body.id}`, { key: owner.key, headers }),
          await call("/api/request-id", { key: owner.key, body: { purpose: "event-like", metadata }, headers, idempotencyKey: `shape-${n}` }),
        ];
        for (const res of answers) expect(res.body.metadata, `${version}: ${res.text}`).toEqual(metadata);
        const list = await call("/api/request-id?limit=100", { key: owner.key, headers });
        expect(list.body.data.find((r: { id: string }) => r.id === created.body.id).metadata, version).toEqual(metadata);
      }
    }
    // Pinned to the first version (no header): the same.
    const pinned = await signup("Pinned");
    await env.DB.prepare("UPDATE accounts SET api_version = ? WHERE id = ?").bind(API_VERSIONS[0].version, pinned.id).run();
    const made = await call("/api/request-id", { key: pinned.key, body: { purpose: "pinned", metadata: EVENT_LIKE } });
    expect(made.headers.get("tender-version")).toBe(API_VERSIONS[0].version);
    expect(made.body.metadata).toEqual(EVENT_LIKE);
    expect((await call(`/api/request-id/${made.body.id}`, { key: pinned.key })).body.metadata).toEqual(EVENT_LIKE);
  });
});

describe("the events feed under many writers", () => {
  type FeedItem = { id: string; type: string; object_id: string | null; livemode: boolean };

  /** Everything committed after `cursor`, oldest first, paged as `tender listen` pages it. */
  async function readAfter(key: string, cursor: string, limit: number): Promise<FeedItem[]> {
    const out: FeedItem[] = [];
    for (let at = cursor; ; ) {
      const res = await call(`/api/events?ending_before=${at}&limit=${limit}`, { key });
      expect(res.status, res.text).toBe(200);
      const page = res.body as { data: FeedItem[]; has_more: boolean };
      out.push(...[...page.data].reverse());
      if (!page.has_more || page.data.length === 0) return out;
      at = page.data[0].id;
    }
  }

  it("a reader paging the whole time sees every event of its mode exactly once, in commit order, with held commits, background settlements and the other mode writing too", async () => {
    const { faultyD1, sqlMatches } = await import("../support/faults");
    const { fetchWith } = await import("../support/http");
    const { liveKey } = await import("../support/fixtures");
    const { quiesce } = await import("../support/db");
    const owner = await signup("Feed under load");
    const live = await liveKey(owner.id);
    const first = await createUser(owner, { name: "First Reader" });
    const start = (await call("/api/events?limit=1", { key: owner.key })).body.data[0] as FeedItem;
    expect(start.object_id).toBe(first.id);
    const plan = await createPlan(owner);

    // Commits held on their way to D1 (their event ids are made now, they commit last).
    const held: { release: () => void; done: Promise<CallResult> }[] = [];
    for (let i = 0; i < 3; i++) {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const db = faultyD1(env.DB, [], { gate: async (op) => (op.kind === "batch" && sqlMatches(op, /insert into "events"/i) ? released : undefined) });
      held.push({ release, done: fetchWith({ DB: db }, "/api/users", { key: owner.key, json: { name: `Held ${i}`, email: `held${i}@example.com` } }) });
    }

    let writing = true;
    const writers = (async () => {
      const work: Promise<unknown>[] = [];
      for (let i = 0; i < 6; i++) {
        work.push(
          (async () => {
            const user = await createUser(owner, { name: `Writer ${i}`, email: `w${i}@example.com` });
            await call(`/api/users/${user.id}`, { key: owner.key, method: "PUT", body: { name: `Writer ${i} again`, email: `w${i}@example.com` } });
            const sub = await subscribed(owner, user.id, plan.id);
            const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: owner.key })).body.data[0];
            // A refund settles through the queue: refund.completed commits in the background.
            await call("/refunds", { key: owner.key, body: { payment_id: payment.id, amount: 100 } });
          })(),
          call("/api/users", { key: live, body: { name: `Live ${i}`, email: `live${i}@example.com` } }),
        );
      }
      await Promise.all(work);
      held.forEach((h) => h.release());
      await Promise.all(held.map((h) => h.done));
      writing = false;
    })();

    // The reader: from `start`, forward page by page, the whole time the writers write.
    const seen: FeedItem[] = [];
    let cursor = start.id;
    let readWhileWriting = 0;
    while (writing) {
      const got = await readAfter(owner.key, cursor, 3);
      seen.push(...got);
      readWhileWriting += got.length;
      if (got.length > 0) cursor = got[got.length - 1].id;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await writers;
    expect(readWhileWriting, "the reader read while the writers wrote").toBeGreaterThan(0);
    await quiesce();
    seen.push(...(await readAfter(owner.key, cursor, 3)));

    const committed = (
      await env.DB.prepare("SELECT id, livemode FROM events WHERE account_id = ? AND feed_position > (SELECT feed_position FROM events WHERE id = ?) ORDER BY feed_position")
        .bind(owner.id, start.id)
        .all<{ id: string; livemode: number }>()
    ).results;
    const testMode = committed.filter((e) => e.livemode === 0).map((e) => e.id);
    expect(committed.some((e) => e.livemode === 1), "the live key wrote meanwhile").toBe(true);
    expect(new Set(seen.map((e) => e.id)).size, "no event read twice").toBe(seen.length);
    expect(seen.every((e) => e.livemode === false), "no live event in a test reader's feed").toBe(true);
    expect(seen.map((e) => e.id), "every test event, once, in commit order").toEqual(testMode);
    expect(seen.filter((e) => e.type === "refund.completed")).toHaveLength(6);
    // The held commits' events carry ids older than events the reader had already passed.
    const heldUsers = (await Promise.all(held.map((h) => h.done))).map((r) => r.body.id as string);
    const heldEvents = seen.filter((e) => e.type === "customer.created" && heldUsers.includes(e.object_id!));
    expect(heldEvents).toHaveLength(3);
    expect(seen.findIndex((e) => e.id > heldEvents[0].id), "a newer event was read before the held ones").toBeLessThan(seen.indexOf(heldEvents[0]));
  }, 60_000);

  it("a cursor of another account or of the other mode answers 400 invalid_cursor, never another tenant's page", async () => {
    const { liveKey } = await import("../support/fixtures");
    const mine = await signup("Mine");
    const theirs = await signup("Theirs");
    const live = await liveKey(mine.id);
    await createUser(mine);
    await createUser(theirs);
    await call("/api/users", { key: live, body: { name: "Live One", email: "live1@example.com" } });
    const theirEvent = (await call("/api/events?limit=1", { key: theirs.key })).body.data[0].id;
    const liveEvent = (await call("/api/events?limit=1", { key: live })).body.data[0].id;
    const testEvent = (await call("/api/events?limit=1", { key: mine.key })).body.data[0].id;
    for (const [key, cursor] of [
      [mine.key, theirEvent],
      [mine.key, liveEvent],
      [live, testEvent],
      [live, theirEvent],
    ]) {
      for (const param of ["starting_after", "ending_before"]) {
        const res = await call(`/api/events?${param}=${cursor}`, { key });
        expect(expectError(res, 400, "invalid_request_error", "invalid_cursor").param).toBe(param);
        for (const filter of ["type=customer.created", `object_id=${cursor}`]) {
          expectError(await call(`/api/events?${param}=${cursor}&${filter}`, { key }), 400, "invalid_request_error", "invalid_cursor");
        }
      }
    }
  });

  it("a type filter refuses look-alikes of a type (case, spaces, fullwidth and Cyrillic letters, zero-width and NUL characters, a list)", async () => {
    const owner = await signup("Types");
    await createUser(owner);
    for (const type of [
      "CUSTOMER.CREATED",
      "customer.created ",
      " customer.created",
      "customer．created",
      "customer.сreated", // Cyrillic с
      "customer.\u200bcreated",
      "customer.created\u0000",
      "customer.*",
      "*",
      "customer",
      "customer.created,customer.updated",
    ]) {
      const res = await call(`/api/events?type=${encodeURIComponent(type)}`, { key: owner.key });
      expect(res.status, `${JSON.stringify(type)}: ${res.text}`).toBe(400);
      expect(res.body.error).toMatchObject({ code: "parameter_invalid", param: "type" });
    }
    const twice = await call("/api/events?type=customer.created&type=customer.updated", { key: owner.key });
    expect(twice.status, twice.text).toBe(400);
    const exact = await call("/api/events?type=customer.created", { key: owner.key });
    expect(exact.status).toBe(200);
    expect(exact.body.data).toHaveLength(1);
  });
});

