// Card data in tests: the sandbox's test PANs, card bodies (every PAN and CVV sent through
// cardFields is recorded, so a file can prove afterwards that none reached the database or the
// logs), and those two scans.
import { env } from "./env";
import { expect, vi } from "vitest";

/** The sandbox processor's test cards, by outcome. */
export const CARDS = {
  visa: "4242424242424242",
  mastercard: "5555555555554444",
  declined: "4000000000000002",
  insufficientFunds: "4000000000009995",
  expired: "4000000000000069",
  processingError: "4000000000000119",
  declineAfterFirst: "4000000000000341",
  amex: "378282246310005",
} as const;

/** The card the proof suites use; its PAN and CVV are recorded (cardFields) for the data scan. */
export const PROOF_CARD = { pan: "4242424242424242", cvv: "739" };

/** Every PAN and CVV a test sent: none may be found anywhere afterwards. */
export const sentPans = new Set<string>();
export const sentCvvs = new Set<string>();

export const nextYear = new Date().getUTCFullYear() + 1;

/** The card fields of a request body (expiring next December); the PAN and CVV are recorded in sentPans and sentCvvs. */
export function cardFields(pan: string = CARDS.visa, cvv = "987", overrides: Record<string, unknown> = {}) {
  sentPans.add(pan.replace(/[ -]/g, ""));
  sentCvvs.add(cvv);
  return { payment_method: "card", card_number: pan, expiration_month: 12, expiration_year: nextYear, cvv, ...overrides };
}

const EXP_YEAR = new Date().getUTCFullYear() + 4;

/**
 * The card fields the billing suite sends: expiring in four years, with a CVV of the brand's
 * length (4 digits for Amex). Not recorded for the card-data scan, unlike cardFields.
 */
export const card = (pan: string = CARDS.visa, overrides: Record<string, unknown> = {}) => ({
  payment_method: "card",
  card_number: pan,
  expiration_month: 12,
  expiration_year: EXP_YEAR,
  cvv: pan.startsWith("37") ? "1234" : "123",
  ...overrides,
});

/** A POST /payout body: 25.00 USD to the card (recorded, see cardFields). */
export function payoutBody(overrides: Record<string, unknown> = {}, pan: string = CARDS.visa, cvv = "987") {
  return { amount: 2500, currency: "usd", description: "Vendor invoice 1042", ...cardFields(pan, cvv), ...overrides };
}

/** A CVV as a standalone token: not inside a longer run of letters or digits (hashes, times). */
const token = (value: string) => new RegExp(`(^|[^0-9A-Za-z])${value}([^0-9A-Za-z]|$)`);

/**
 * Reads every row of every table and asserts that no PAN sent appears anywhere (even inside
 * another value), that no CVV sent appears as a value or token, and that no stored text holds a
 * "card_number" or "cvv" field: request bodies are never stored verbatim.
 */
export async function expectNoCardData() {
  // Every table, except D1's own metadata table, which D1 does not let a Worker read.
  const tables = (await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all<{ name: string }>()).results
    .map((t) => t.name)
    .filter((name) => !name.startsWith("_cf_"));
  expect(tables).toEqual(expect.arrayContaining(["payouts", "payments", "refunds", "events", "idempotency_keys", "webhook_deliveries"]));
  let cells = 0;
  for (const table of tables) {
    const rows = (await env.DB.prepare(`SELECT * FROM "${table}"`).all<Record<string, unknown>>()).results;
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        if (value === null) continue;
        cells++;
        const text = typeof value === "string" ? value : value instanceof ArrayBuffer ? new TextDecoder().decode(value) : String(value);
        const where = `${table}.${column}`;
        for (const pan of sentPans) {
          expect(text.includes(pan), `PAN found in ${where}`).toBe(false);
          expect(text.includes(pan.slice(0, 12)), `PAN prefix found in ${where}`).toBe(false);
        }
        if (typeof value === "string") {
          for (const cvv of sentCvvs) expect(token(cvv).test(text), `CVV ${cvv} found in ${where}: ${text.slice(0, 200)}`).toBe(false);
          expect(/"(card_number|cvv)"/.test(text), `card field stored in ${where}`).toBe(false);
        }
      }
    }
  }
  return { tables: tables.length, cells };
}

/** Records everything the Worker logs (it runs in this isolate), to check no PAN or CVV is logged. */
export function captureLogs() {
  const lines: string[] = [];
  const spies = (["log", "info", "warn", "error", "debug"] as const).map((level) =>
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      lines.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a) ?? String(a))).join(" "));
    }),
  );
  return {
    lines,
    expectNoCardData() {
      for (const line of lines) {
        for (const pan of sentPans) expect(line.includes(pan), `PAN logged: ${line.slice(0, 200)}`).toBe(false);
        for (const cvv of sentCvvs) expect(token(cvv).test(line) && /cvv/i.test(line), `CVV logged: ${line.slice(0, 200)}`).toBe(false);
      }
    },
    restore: () => spies.forEach((s) => s.mockRestore()),
  };
}
