import { describe, it, expect } from "vitest";
import fc from "fast-check";
import {
  cardFingerprint,
  checkCard,
  containsCardNumber,
  cvvLength,
  detectBrand,
  isExpired,
  luhnValid,
  type CardBrand,
  type CardInput,
} from "../../src/domain/cards";

const NOW = new Date("2026-06-15T12:00:00.000Z");

/** Appends the Luhn check digit to `body`. */
function withCheckDigit(body: string): string {
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = body.charCodeAt(body.length - 1 - i) - 48;
    if (i % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return body + String((10 - (sum % 10)) % 10);
}

const validPan = fc.stringMatching(/^[0-9]{11,18}$/).map(withCheckDigit);

const STRIPE_TEST_CARDS: Array<[string, CardBrand]> = [
  ["4242424242424242", "visa"],
  ["4000056655665556", "visa"],
  ["4000000000000002", "visa"],
  ["4000000000009995", "visa"],
  ["5555555555554444", "mastercard"],
  ["2223003122003222", "mastercard"],
  ["5200828282828210", "mastercard"],
  ["378282246310005", "amex"],
  ["371449635398431", "amex"],
  ["6011111111111117", "discover"],
  ["6011000990139424", "discover"],
  ["3056930009020004", "diners"],
  ["36227206271667", "diners"],
  ["3566002020360505", "jcb"],
  ["6200000000000005", "unionpay"],
];

function card(overrides: Partial<CardInput> = {}): CardInput {
  return { card_number: "4242424242424242", expiration_month: 12, expiration_year: 2030, cvv: "123", ...overrides };
}

describe("luhnValid", () => {
  it("accepts the Stripe test cards", () => {
    for (const [pan] of STRIPE_TEST_CARDS) expect(luhnValid(pan), pan).toBe(true);
  });

  it("rejects bad check digits, non-digits and bad lengths", () => {
    expect(luhnValid("4242424242424241")).toBe(false);
    expect(luhnValid("4242 4242 4242 4242")).toBe(false);
    expect(luhnValid("4242-4242-4242-4242")).toBe(false);
    expect(luhnValid("")).toBe(false);
    expect(luhnValid("0")).toBe(false);
    expect(luhnValid(withCheckDigit("1234567890"))).toBe(false); // 11 digits
    expect(luhnValid(withCheckDigit("12345678901"))).toBe(true); // 12 digits
    expect(luhnValid(withCheckDigit("123456789012345678"))).toBe(true); // 19 digits
    expect(luhnValid(withCheckDigit("1234567890123456789"))).toBe(false); // 20 digits
    expect(luhnValid("４２４２４２４２４２４２４２４２")).toBe(false); // full-width digits
  });

  it("accepts every number built with a correct check digit", () => {
    fc.assert(
      fc.property(validPan, (pan) => {
        expect(luhnValid(pan)).toBe(true);
      }),
    );
  });

  it("changing any single digit of a valid number breaks Luhn", () => {
    fc.assert(
      fc.property(validPan, fc.nat(), fc.integer({ min: 1, max: 9 }), (pan, pos, delta) => {
        const i = pos % pan.length;
        const changed = String((Number(pan[i]) + delta) % 10);
        const mutated = pan.slice(0, i) + changed + pan.slice(i + 1);
        expect(mutated).not.toBe(pan);
        expect(luhnValid(mutated)).toBe(false);
      }),
    );
  });
});

describe("detectBrand", () => {
  it("detects the Stripe test cards", () => {
    for (const [pan, brand] of STRIPE_TEST_CARDS) expect(detectBrand(pan), pan).toBe(brand);
  });

  it("follows the IIN range boundaries", () => {
    const cases: Array<[string, CardBrand]> = [
      ["4", "visa"],
      ["51", "mastercard"], ["55", "mastercard"], ["50", "unknown"], ["56", "unknown"],
      ["2221", "mastercard"], ["2720", "mastercard"], ["2220", "unknown"], ["2721", "unknown"],
      ["34", "amex"], ["37", "amex"], ["35", "unknown"],
      ["6011", "discover"], ["6012", "unknown"], ["644", "discover"], ["649", "discover"], ["643", "unknown"], ["65", "discover"],
      ["36", "diners"], ["300", "diners"], ["305", "diners"], ["306", "unknown"], ["38", "diners"], ["39", "diners"],
      ["3528", "jcb"], ["3589", "jcb"], ["3527", "unknown"], ["3590", "unknown"],
      ["62", "unionpay"],
      ["1", "unknown"], ["9", "unknown"], ["", "unknown"], ["4242 4242", "unknown"],
    ];
    for (const [prefix, brand] of cases) {
      const pan = prefix === "" || /\D/.test(prefix) ? prefix : prefix.padEnd(16, "0");
      expect(detectBrand(pan), prefix).toBe(brand);
    }
  });

  it("cvvLength is 4 only for amex", () => {
    expect(cvvLength("amex")).toBe(4);
    for (const b of ["visa", "mastercard", "discover", "diners", "jcb", "unionpay", "unknown"] as const) {
      expect(cvvLength(b), b).toBe(3);
    }
  });
});

describe("isExpired", () => {
  it("a card is valid through the last millisecond of its expiry month (UTC)", () => {
    expect(isExpired(12, 2026, new Date("2026-12-31T23:59:59.999Z"))).toBe(false);
    expect(isExpired(12, 2026, new Date("2027-01-01T00:00:00.000Z"))).toBe(true);
    expect(isExpired(2, 2028, new Date("2028-02-29T23:59:59.999Z"))).toBe(false); // leap year
    expect(isExpired(2, 2028, new Date("2028-03-01T00:00:00.000Z"))).toBe(true);
    expect(isExpired(6, 2026, new Date("2026-06-01T00:00:00.000Z"))).toBe(false);
    expect(isExpired(5, 2026, new Date("2026-06-01T00:00:00.000Z"))).toBe(true);
  });

  it("uses UTC regardless of what the local calendar date would be", () => {
    // 2027-01-01T00:30+01:00 is still 2026-12-31 in UTC.
    expect(isExpired(12, 2026, new Date("2027-01-01T00:30:00+01:00"))).toBe(false);
    expect(isExpired(12, 2026, new Date("2026-12-31T23:30:00-01:00"))).toBe(true);
  });

  it("throws on an invalid month", () => {
    expect(() => isExpired(0, 2026, NOW)).toThrow(RangeError);
    expect(() => isExpired(13, 2026, NOW)).toThrow(RangeError);
  });

  it("is monotonic: expired exactly from the first instant of the next month", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 2000, max: 2099 }), fc.integer({ min: -1e11, max: 1e11 }), (m, y, offset) => {
        const boundary = Date.UTC(y, m, 1);
        expect(isExpired(m, y, new Date(boundary + offset))).toBe(offset >= 0);
      }),
    );
  });
});

describe("cardFingerprint", () => {
  it("is deterministic, lowercase hex of 64 characters", async () => {
    const a = await cardFingerprint("4242424242424242", "secret-key");
    const b = await cardFingerprint("4242424242424242", "secret-key");
    expect(a).toBe(b);
    expect(a).toMatch(/^[0-9a-f]{64}$/);
  });

  it("matches the HMAC-SHA256 of the digits keyed with the UTF-8 key", async () => {
    const enc = new TextEncoder();
    const key = await crypto.subtle.importKey("raw", enc.encode("clé-🔑"), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode("5555555555554444")));
    const hex = [...mac].map((x) => x.toString(16).padStart(2, "0")).join("");
    expect(await cardFingerprint("5555555555554444", "clé-🔑")).toBe(hex);
  });

  it("depends on the key and on the number", async () => {
    const base = await cardFingerprint("4242424242424242", "key-a");
    expect(await cardFingerprint("4242424242424242", "key-b")).not.toBe(base);
    expect(await cardFingerprint("4000056655665556", "key-a")).not.toBe(base);
  });

  it("ignores spaces and dashes, and never contains the number", async () => {
    const plain = await cardFingerprint("4242424242424242", "k");
    expect(await cardFingerprint("4242 4242 4242 4242", "k")).toBe(plain);
    expect(await cardFingerprint("4242-4242-4242-4242", "k")).toBe(plain);
    expect(plain).not.toContain("4242");
  });

  it("rejects non-digit numbers and empty keys", async () => {
    await expect(cardFingerprint("4242x4242", "k")).rejects.toThrow(TypeError);
    await expect(cardFingerprint("4242424242424242", "")).rejects.toThrow(TypeError);
  });
});

describe("checkCard", () => {
  it("accepts valid cards and returns the normalized PAN and a summary", () => {
    const r = checkCard(card({ card_number: "4242 4242-4242 4242" }), NOW);
    expect(r).toEqual({
      ok: true,
      pan: "4242424242424242",
      summary: { brand: "visa", last4: "4242", exp_month: 12, exp_year: 2030 },
    });
    const amex = checkCard(card({ card_number: "378282246310005", cvv: "1234" }), NOW);
    expect(amex).toEqual({
      ok: true,
      pan: "378282246310005",
      summary: { brand: "amex", last4: "0005", exp_month: 12, exp_year: 2030 },
    });
  });

  it("detects the brand of each Stripe test card", () => {
    for (const [pan, brand] of STRIPE_TEST_CARDS) {
      const r = checkCard(card({ card_number: pan, cvv: brand === "amex" ? "1234" : "123" }), NOW);
      expect(r.ok && r.summary.brand, pan).toBe(brand);
    }
  });

  it("rejects invalid card numbers", () => {
    for (const n of ["4242424242424241", "42424242424", "42424242424242424242", "4242abcd42424242", "", "4242.4242.4242.4242"]) {
      const r = checkCard(card({ card_number: n }), NOW);
      expect(r, n).toEqual({
        ok: false,
        code: "invalid_number",
        param: "card_number",
        message: "The card number is not a valid card number.",
      });
    }
    expect(checkCard(card({ card_number: 4242424242424242 as unknown as string }), NOW)).toMatchObject({ ok: false, code: "invalid_number" });
  });

  it("rejects invalid expiration months", () => {
    for (const m of [0, 13, -1, 1.5, NaN, "12" as unknown as number]) {
      expect(checkCard(card({ expiration_month: m }), NOW), String(m)).toMatchObject({
        ok: false,
        code: "invalid_expiry_month",
        param: "expiration_month",
      });
    }
    expect(checkCard(card({ expiration_month: 1 }), NOW).ok).toBe(true);
  });

  it("rejects expiration years that are not four-digit 2000..2099", () => {
    for (const y of [30, 26, 1999, 2100, 20300, 2030.5, "2030" as unknown as number]) {
      expect(checkCard(card({ expiration_year: y }), NOW), String(y)).toMatchObject({
        ok: false,
        code: "invalid_expiry_year",
        param: "expiration_year",
      });
    }
    expect(checkCard(card({ expiration_year: 2099 }), NOW).ok).toBe(true);
  });

  it("reports expired cards on expiration_year at the month-end boundary", () => {
    const input = card({ expiration_month: 12, expiration_year: 2026 });
    expect(checkCard(input, new Date("2026-12-31T23:59:59.999Z")).ok).toBe(true);
    expect(checkCard(input, new Date("2027-01-01T00:00:00.000Z"))).toEqual({
      ok: false,
      code: "expired_card",
      param: "expiration_year",
      message: "The card has expired.",
    });
  });

  it("requires a CVV of the brand's length", () => {
    expect(checkCard(card({ cvv: "12" }), NOW)).toEqual({
      ok: false,
      code: "invalid_cvc",
      param: "cvv",
      message: "The CVV must be three digits for Visa cards.",
    });
    expect(checkCard(card({ card_number: "378282246310005", cvv: "123" }), NOW)).toEqual({
      ok: false,
      code: "invalid_cvc",
      param: "cvv",
      message: "The CVV must be four digits for American Express cards.",
    });
    for (const cvv of ["1234", "12a", " 123", "", "１２３"]) {
      expect(checkCard(card({ cvv }), NOW), cvv).toMatchObject({ ok: false, code: "invalid_cvc", param: "cvv" });
    }
    expect(checkCard(card({ cvv: 123 as unknown as string }), NOW)).toMatchObject({ ok: false, code: "invalid_cvc" });
  });

  it("checks in order: number, month, year, expiry, cvv", () => {
    const allBad = { card_number: "1", expiration_month: 0, expiration_year: 1, cvv: "x" };
    expect(checkCard(allBad, NOW)).toMatchObject({ code: "invalid_number" });
    expect(checkCard({ ...allBad, card_number: "4242424242424242" }, NOW)).toMatchObject({ code: "invalid_expiry_month" });
    expect(checkCard({ ...allBad, card_number: "4242424242424242", expiration_month: 1 }, NOW)).toMatchObject({ code: "invalid_expiry_year" });
    expect(checkCard({ ...allBad, card_number: "4242424242424242", expiration_month: 1, expiration_year: 2020 }, NOW)).toMatchObject({ code: "expired_card" });
  });

  it("messages never contain the card number or the CVV (no digits at all)", () => {
    const input = fc.record({
      card_number: fc.oneof(validPan, fc.stringMatching(/^[0-9 -]{0,24}$/), fc.string()),
      expiration_month: fc.oneof(fc.integer({ min: -2, max: 14 }), fc.double()),
      expiration_year: fc.oneof(fc.integer({ min: 1990, max: 2110 }), fc.integer()),
      cvv: fc.oneof(fc.stringMatching(/^[0-9]{0,6}$/), fc.string()),
    });
    fc.assert(
      fc.property(input, fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true }), (inp, now) => {
        const r = checkCard(inp, now);
        if (r.ok) return;
        const digits = inp.card_number.replace(/[ -]/g, "");
        expect(r.message).not.toMatch(/[0-9]/);
        // Card numbers and CVVs are digits: any input containing one can never appear in a digit-free message.
        if (/[0-9]/.test(digits)) expect(r.message).not.toContain(digits);
        if (/[0-9]/.test(inp.cvv)) expect(r.message).not.toContain(inp.cvv);
        expect(r.message.length).toBeGreaterThan(10);
      }),
      { numRuns: 1000 },
    );
  });

  it("never echoes a sensitive value anywhere in a failure result", () => {
    fc.assert(
      fc.property(validPan, fc.integer({ min: 1, max: 12 }), fc.integer({ min: 2000, max: 2099 }), fc.stringMatching(/^[0-9]{1,6}$/), (pan, month, year, cvv) => {
        const r = checkCard({ card_number: pan, expiration_month: month, expiration_year: year, cvv }, NOW);
        if (r.ok) {
          expect(r.pan).toBe(pan);
          expect(r.summary.last4).toBe(pan.slice(-4));
          return;
        }
        const serialized = JSON.stringify(r);
        expect(serialized).not.toContain(cvv);
        expect(serialized).not.toContain(pan);
        expect(serialized).not.toContain(pan.slice(-4));
      }),
    );
  });
});

describe("containsCardNumber", () => {
  const TEST_CARDS = ["4242424242424242", "5555555555554444", "378282246310005"];

  /** `digits` grouped the way people write them: fours (amex: 4-6-5), joined by `sep`. */
  function grouped(digits: string, sep: string): string {
    if (digits.length === 15) return [digits.slice(0, 4), digits.slice(4, 10), digits.slice(10)].join(sep);
    return digits.match(/.{1,4}/g)!.join(sep);
  }

  /** Text with no digits at all (so it can neither extend a run nor hold one). */
  const prose = fc.string({ maxLength: 40 }).map((s) => s.replace(/[0-9]/g, ""));
  /** A separator that ends a digit run: not a lone space or dash followed by a digit. */
  const boundary = fc.constantFrom(" card ", ": ", "\n", "(", "  ", "--", " - ", "/", "#", "x");
  /** Every Luhn-valid number of a known brand, 13 to 19 digits. */
  const brandPan = fc
    .tuple(fc.constantFrom("4", "51", "55", "2221", "2720", "34", "37", "6011", "65", "3528", "36", "62"), fc.integer({ min: 13, max: 19 }), fc.stringMatching(/^[0-9]{18}$/))
    .map(([prefix, length, fill]) => withCheckDigit((prefix + fill).slice(0, length - 1)))
    .filter((pan) => detectBrand(pan) !== "unknown");

  it("detects the test cards, plain, spaced or dashed, alone or inside text", () => {
    for (const pan of TEST_CARDS) {
      for (const form of [pan, grouped(pan, " "), grouped(pan, "-")]) {
        for (const text of [form, `card ${form}`, `${form} exp 12/30`, `Refund to card:${form}.`, `x${form}y`, `{"pan":"${form}"}`]) {
          expect(containsCardNumber(text), text).toBe(true);
        }
      }
    }
    expect(containsCardNumber("4242 4242-4242 4242")).toBe(true); // mixed separators
    expect(containsCardNumber("4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2")).toBe(true); // a separator between every digit
    expect(containsCardNumber("paid with 4242 4242 4242 4242 on 2026-01-15")).toBe(true);
  });

  it("detects any Luhn-valid branded number of 13 to 19 digits, however it is embedded", () => {
    fc.assert(
      fc.property(prose, boundary, brandPan, fc.constantFrom("", " ", "-"), boundary, prose, (before, open, pan, sep, close, after) => {
        const form = sep === "" ? pan : grouped(pan, sep);
        expect(containsCardNumber(before + open + form + close + after)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("ignores numbers that fail Luhn", () => {
    fc.assert(
      fc.property(brandPan, fc.integer({ min: 1, max: 9 }), prose, (pan, delta, text) => {
        const last = String((Number(pan[pan.length - 1]) + delta) % 10);
        const broken = pan.slice(0, -1) + last;
        expect(luhnValid(broken)).toBe(false);
        expect(containsCardNumber(`${text} ${broken} ${text}`)).toBe(false);
        // Grouped in fours, a 17-19 digit number reads as a 16-digit card and its expiry or CVV
        // when its first four groups are a card ("4242 4242 4242 4242 123"): that one is refused.
        const groups = grouped(broken, " ").split(" ");
        const cardThenShortGroup = groups.length === 5 && groups[4].length <= 3 && luhnValid(groups.slice(0, 4).join("")) && detectBrand(groups.slice(0, 4).join("")) !== "unknown";
        expect(containsCardNumber(grouped(broken, " "))).toBe(cardThenShortGroup);
      }),
    );
    expect(containsCardNumber("4242 4242 4242 4241")).toBe(false);
  });

  it("reads a card number followed by its expiry or CVV, in groups or plain", () => {
    expect(containsCardNumber("4242 4242 4242 4242 123")).toBe(true);
    expect(containsCardNumber("4242 4242 4242 4242 12/27")).toBe(true);
    expect(containsCardNumber("4242424242424242 12 27 123")).toBe(true);
    // A fourth digit after a grouped card reads as a 20-digit reference, as before.
    expect(containsCardNumber("4242 4242 4242 4242 1234")).toBe(false);
  });

  it("ignores Luhn-valid numbers with no card brand's prefix", () => {
    for (const prefix of ["0", "1", "7", "8", "9", "50", "56", "2220", "2721", "35", "306", "6012", "643"]) {
      const pan = withCheckDigit(prefix.padEnd(15, "0"));
      expect(luhnValid(pan) && detectBrand(pan), pan).toBe("unknown");
      expect(containsCardNumber(`ref ${pan}`), pan).toBe(false);
    }
    fc.assert(
      fc.property(fc.constantFrom("0", "1", "7", "8", "9"), fc.stringMatching(/^[0-9]{11,17}$/), (first, rest) => {
        expect(containsCardNumber(withCheckDigit(first + rest))).toBe(false);
      }),
    );
  });

  it("ignores runs shorter than 13 or longer than 19 digits, without scanning inside longer runs", () => {
    expect(containsCardNumber(withCheckDigit("42424242424"))).toBe(false); // 12 digits
    expect(containsCardNumber("4242 4242 4242")).toBe(false);
    fc.assert(
      fc.property(brandPan, fc.stringMatching(/^[0-9]{1,8}$/), fc.boolean(), (pan, extra, atStart) => {
        // A valid card inside a longer run of 20+ digits is part of a reference number, not a card.
        const run = atStart ? pan + extra : extra + pan;
        fc.pre(run.replace(/[ -]/g, "").length >= 20);
        expect(containsCardNumber(`reference ${run}`)).toBe(false);
        expect(containsCardNumber(`reference ${grouped(run, " ")}`)).toBe(false);
      }),
    );
    expect(containsCardNumber("4242424242424242424242424")).toBe(false); // 25 digits
    expect(containsCardNumber("0004242424242424242")).toBe(false); // 19 digits, leading zeros: no brand
  });

  it("reads digits as a person does: up to three spaces, dashes, dots or underscores between them, any script's digits, invisible characters dropped", () => {
    for (const text of [
      "4242  4242  4242  4242",
      "4242--4242--4242--4242",
      "4242 - 4242 - 4242 - 4242",
      "4242.4242.4242.4242",
      "4242_4242_4242_4242",
      "4242\u00a04242\u00a04242\u00a04242",
      "4242\u200b4242\u200b4242\u200b4242",
      "４２４２４２４２４２４２４２４２", // full-width digits
      "٤٢٤٢٤٢٤٢٤٢٤٢٤٢٤٢", // Arabic-Indic digits
    ]) {
      expect(containsCardNumber(text), text).toBe(true);
    }
  });

  it("ends a run at four separators in a row or at any other character", () => {
    expect(containsCardNumber("4242    4242    4242    4242")).toBe(false);
    expect(containsCardNumber("4242/4242/4242/4242")).toBe(false);
    expect(containsCardNumber("4242,4242,4242,4242")).toBe(false);
    expect(containsCardNumber("4242:4242:4242:4242")).toBe(false);
  });

  it("ignores everyday text: phone numbers, order ids, dates, UUIDs, amounts", () => {
    const texts = [
      "",
      "checkout",
      "Vendor invoice 1042",
      "Call +1 (415) 555-0132 or +44 20 7946 0958",
      "+1-415-555-0132",
      "order A-1001",
      "A-1001, A-1002, A-1003",
      "2026-01-15",
      "2026-01-15T12:00:00.000Z",
      "from 2026-01-15 to 2026-12-31",
      "019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b",
      "123e4567-e89b-12d3-a456-426614174000",
      "41111111-1111-4111-8111-111111111111",
      "USD 1,234,567.89",
      "1700000000000", // a millisecond timestamp: 13 digits, no brand
      "Everything in Pro.",
    ];
    for (const text of texts) expect(containsCardNumber(text), text).toBe(false);
    fc.assert(
      fc.property(fc.uuid(), fc.date({ noInvalidDate: true, min: new Date("1970-01-01T00:00:00Z"), max: new Date("2999-12-31T00:00:00Z") }), (uuid, date) => {
        expect(containsCardNumber(uuid)).toBe(false);
        expect(containsCardNumber(uuid.toUpperCase())).toBe(false);
        expect(containsCardNumber(date.toISOString())).toBe(false);
        expect(containsCardNumber(`${date.toISOString().slice(0, 10)} ${uuid}`)).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it("ignores text with fewer than 13 digits, whatever else it holds", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        const digits = text.replace(/[^0-9]/g, "").length;
        if (digits < 13) expect(containsCardNumber(text)).toBe(false);
      }),
    );
  });
});
