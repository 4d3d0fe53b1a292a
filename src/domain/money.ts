/**
 * Money primitives. Pure: no I/O, no clock, no floating-point arithmetic on
 * amounts. Amounts are integers in the currency's minor unit; decimal text is
 * handled as strings and BigInt only.
 */

/**
 * Active ISO 4217 currency codes (list one, lowercase) mapped to their
 * minor-unit exponent, i.e. the number of decimal places of one minor unit.
 *
 * Includes funds codes (bov, che, chw, clf, cou, mxv, usn, uyi, uyw).
 * Excludes codes with no minor unit ("N.A." in ISO 4217): precious metals
 * (xau, xag, xpd, xpt), bond-market units (xba, xbb, xbc, xbd), SDR (xdr),
 * xsu, xua and the testing / no-currency codes (xts, xxx), because they are
 * not money that can be charged here.
 *
 * Withdrawn codes are deliberately absent, e.g. hrk (replaced by eur, 2023),
 * sll (replaced by sle), zwl (replaced by zwg, 2024), ang (replaced by xcg,
 * 2025-2026) and bgn (Bulgaria adopted the euro on 2026-01-01).
 */
export const CURRENCY_EXPONENTS: Readonly<Record<string, number>> = Object.freeze({
  aed: 2, afn: 2, all: 2, amd: 2, aoa: 2, ars: 2, aud: 2, awg: 2, azn: 2,
  bam: 2, bbd: 2, bdt: 2, bhd: 3, bif: 0, bmd: 2, bnd: 2, bob: 2, bov: 2,
  brl: 2, bsd: 2, btn: 2, bwp: 2, byn: 2, bzd: 2,
  cad: 2, cdf: 2, che: 2, chf: 2, chw: 2, clf: 4, clp: 0, cny: 2, cop: 2,
  cou: 2, crc: 2, cuc: 2, cup: 2, cve: 2, czk: 2,
  djf: 0, dkk: 2, dop: 2, dzd: 2,
  egp: 2, ern: 2, etb: 2, eur: 2,
  fjd: 2, fkp: 2,
  gbp: 2, gel: 2, ghs: 2, gip: 2, gmd: 2, gnf: 0, gtq: 2, gyd: 2,
  hkd: 2, hnl: 2, htg: 2, huf: 2,
  idr: 2, ils: 2, inr: 2, iqd: 3, irr: 2, isk: 0,
  jmd: 2, jod: 3, jpy: 0,
  kes: 2, kgs: 2, khr: 2, kmf: 0, kpw: 2, krw: 0, kwd: 3, kyd: 2, kzt: 2,
  lak: 2, lbp: 2, lkr: 2, lrd: 2, lsl: 2, lyd: 3,
  mad: 2, mdl: 2, mga: 2, mkd: 2, mmk: 2, mnt: 2, mop: 2, mru: 2, mur: 2,
  mvr: 2, mwk: 2, mxn: 2, mxv: 2, myr: 2, mzn: 2,
  nad: 2, ngn: 2, nio: 2, nok: 2, npr: 2, nzd: 2,
  omr: 3,
  pab: 2, pen: 2, pgk: 2, php: 2, pkr: 2, pln: 2, pyg: 0,
  qar: 2,
  ron: 2, rsd: 2, rub: 2, rwf: 0,
  sar: 2, sbd: 2, scr: 2, sdg: 2, sek: 2, sgd: 2, shp: 2, sle: 2, sos: 2,
  srd: 2, ssp: 2, stn: 2, svc: 2, syp: 2, szl: 2,
  thb: 2, tjs: 2, tmt: 2, tnd: 3, top: 2, try: 2, ttd: 2, twd: 2, tzs: 2,
  uah: 2, ugx: 0, usd: 2, usn: 2, uyi: 0, uyu: 2, uyw: 4, uzs: 2,
  ved: 2, ves: 2, vnd: 0, vuv: 0,
  wst: 2,
  xaf: 0, xcd: 2, xcg: 2, xof: 0, xpf: 0,
  yer: 2,
  zar: 2, zmw: 2, zwg: 2,
});

/** Returns the lowercase ISO 4217 code when `code` is a known currency (any case), else undefined. */
export function normalizeCurrency(code: string): string | undefined {
  if (typeof code !== "string" || !/^[A-Za-z]{3}$/.test(code)) return undefined;
  const lower = code.toLowerCase();
  return Object.hasOwn(CURRENCY_EXPONENTS, lower) ? lower : undefined;
}

/** Minor-unit exponent of a currency. Throws on an unknown code (callers normalize first). */
export function currencyExponent(code: string): number {
  const normalized = normalizeCurrency(code);
  if (normalized === undefined) throw new RangeError(`Unknown currency code: ${JSON.stringify(code)}`);
  return CURRENCY_EXPONENTS[normalized];
}

/** Smallest chargeable amount, in minor units. */
export const MIN_AMOUNT = 1;

/**
 * Largest amount, in minor units (inclusive), for every currency.
 *
 * Why 99,999,999,999 (eleven nines):
 * - It is the largest 11-digit integer, so an amount is always at most 11
 *   digits long whatever the currency (e.g. 999,999,999.99 USD, 99,999,999,999
 *   JPY, 99,999,999.999 KWD), far above any single real card payment.
 * - It is about 1/90,000 of Number.MAX_SAFE_INTEGER (2^53 - 1), so amounts
 *   stay exact in JS numbers, JSON and SQLite INTEGER columns, and sums of
 *   tens of thousands of them (captured + refunded totals, balances) remain
 *   exact integers without BigInt.
 */
export const MAX_AMOUNT = 99_999_999_999;

/** True when `minor` is a safe integer within [MIN_AMOUNT, MAX_AMOUNT]. */
export function isValidAmount(minor: number): boolean {
  return Number.isSafeInteger(minor) && minor >= MIN_AMOUNT && minor <= MAX_AMOUNT;
}

export type DecimalParse =
  | { ok: true; minor: number }
  | { ok: false; reason: "format" | "too_many_decimals" | "out_of_range" };

const MAX_EXPONENT = 18;
const MAX_AMOUNT_BIG = BigInt(MAX_AMOUNT);
const PLAIN_DECIMAL = /^([0-9]+)(?:\.([0-9]+))?$/;
// JSON number grammar (RFC 8259): -?int(.digits)?([eE][+-]?digits)?
const JSON_NUMBER = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?$/;

function assertExponent(exponent: number): void {
  if (!Number.isInteger(exponent) || exponent < 0 || exponent > MAX_EXPONENT) {
    throw new RangeError(`Invalid minor-unit exponent: ${exponent}`);
  }
}

/**
 * Parses a plain, unsigned decimal ("19.99", "20", "0.5", "19.990") into minor
 * units for a currency with the given exponent.
 *
 * - Anything but `digits[.digits]` (sign, exponent notation, spaces, "5.",
 *   ".5", empty) is "format".
 * - Fraction digits beyond `exponent` are accepted only if they are zeros
 *   ("19.990" -> 1999 for exponent 2); otherwise "too_many_decimals".
 * - Results above MAX_AMOUNT are "out_of_range". Zero is accepted.
 */
export function parseDecimalToMinor(decimal: string, exponent: number): DecimalParse {
  assertExponent(exponent);
  if (typeof decimal !== "string") return { ok: false, reason: "format" };
  const m = PLAIN_DECIMAL.exec(decimal);
  if (!m) return { ok: false, reason: "format" };
  const intDigits = m[1];
  const fracDigits = m[2] ?? "";

  const significant = fracDigits.slice(0, exponent);
  const excess = fracDigits.slice(exponent);
  if (/[^0]/.test(excess)) return { ok: false, reason: "too_many_decimals" };

  // Cheap guard before BigInt so a huge digit string cannot cost much.
  const intTrimmed = intDigits.replace(/^0+/, "");
  if (intTrimmed.length + exponent > 20) return { ok: false, reason: "out_of_range" };

  const minor = BigInt(intTrimmed + significant.padEnd(exponent, "0") || "0");
  if (minor > MAX_AMOUNT_BIG) return { ok: false, reason: "out_of_range" };
  return { ok: true, minor: Number(minor) };
}

/**
 * Formats an integer amount of minor units as a decimal string with exactly
 * `exponent` fraction digits: (3900, 2) -> "39.00", (100, 0) -> "100",
 * (1234, 3) -> "1.234", (5, 2) -> "0.05". Negative amounts get a leading "-".
 * Throws RangeError when `minor` is not a safe integer.
 */
export function formatMinor(minor: number, exponent: number): string {
  assertExponent(exponent);
  if (!Number.isSafeInteger(minor)) throw new RangeError(`Amount must be a safe integer: ${minor}`);
  const sign = minor < 0 ? "-" : "";
  const digits = String(minor < 0 ? -minor : minor);
  if (exponent === 0) return sign + digits;
  const padded = digits.padStart(exponent + 1, "0");
  return `${sign}${padded.slice(0, -exponent)}.${padded.slice(-exponent)}`;
}

/** Groups the integer part in threes: "1234567.89" -> "1,234,567.89". */
function groupThousands(decimal: string): string {
  const [sign, rest] = decimal.startsWith("-") ? ["-", decimal.slice(1)] : ["", decimal];
  const [whole, fraction] = rest.split(".");
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${sign}${grouped}${fraction === undefined ? "" : `.${fraction}`}`;
}

/**
 * An amount of minor units in major units with its currency, as people read it (the dashboard,
 * invoice PDFs): (1000, "usd") -> "10.00 USD", (1000, "jpy") -> "1,000 JPY", (1000, "kwd") ->
 * "1.000 KWD". An unknown currency or a non-integer says so rather than guessing.
 */
export function formatMoney(minor: number, currency: string): string {
  const code = normalizeCurrency(currency);
  if (code === undefined || !Number.isSafeInteger(minor)) return `${minor} ${String(currency).toUpperCase()} (minor units)`;
  return `${groupThousands(formatMinor(minor, CURRENCY_EXPONENTS[code]))} ${code.toUpperCase()}`;
}

/**
 * A unit price given in minor units with up to 12 decimals (an invoice line's
 * `unit_amount_decimal`, decimal text) in major units with its currency, exact, as an invoice
 * prints it: at least the currency's exponent of decimals, more only where the price has them.
 * ("1999", "usd") -> "19.99 USD", ("0.35", "usd") -> "0.0035 USD", ("1500", "jpy") ->
 * "1,500 JPY". Text that is not plain decimal digits is returned as sent, with the currency.
 */
export function formatUnitAmount(unitAmountDecimal: string, currency: string): string {
  const code = normalizeCurrency(currency);
  const m = /^([0-9]+)(?:\.([0-9]+))?$/.exec(unitAmountDecimal);
  if (code === undefined || !m) return `${unitAmountDecimal} ${String(currency).toUpperCase()} (minor units)`;
  const exponent = CURRENCY_EXPONENTS[code];
  const fraction = m[2] ?? "";
  const scale = fraction.length + exponent;
  const digits = (BigInt(m[1] + fraction)).toString().padStart(scale + 1, "0");
  const whole = digits.slice(0, digits.length - scale);
  let decimals = digits.slice(digits.length - scale);
  while (decimals.length > exponent && decimals.endsWith("0")) decimals = decimals.slice(0, -1);
  return `${groupThousands(decimals === "" ? whole : `${whole}.${decimals}`)} ${code.toUpperCase()}`;
}

/**
 * A client sent a non-integer literal (the exact JSON source text) where an
 * integer amount in minor units was required. Returns the integer it probably
 * meant, or undefined when there is no exact, in-range answer.
 *
 * - Decimal with a fraction ("100.00", "12.5"): read as major units and
 *   converted exactly: "100.00" usd -> 10000, "12.5" usd -> 1250,
 *   "100.00" jpy -> 100, "1.234" kwd -> 1234. Too many decimals -> undefined.
 * - Exponent notation ("1e3", "1.5E2", "2500e-1"): the exact value of the
 *   literal when it is an integer ("1e3" -> 1000, "2500e-1" -> 250),
 *   independent of the currency; undefined when it is not an integer ("1e-2").
 * - Plain integer ("100"): that integer.
 * - Negative values, invalid literals and results above MAX_AMOUNT -> undefined.
 *   Zero is returned as 0 (callers decide the minimum).
 */
export function suggestMinorUnits(decimalSource: string, exponent: number): number | undefined {
  assertExponent(exponent);
  if (typeof decimalSource !== "string") return undefined;
  const m = JSON_NUMBER.exec(decimalSource.trim());
  if (!m) return undefined;
  const [, sign, intDigits, fracDigits, expSign, expDigits] = m;

  let value: bigint;
  if (expDigits !== undefined) {
    const exact = exactIntegerValue(intDigits + (fracDigits ?? ""), fracDigits?.length ?? 0, expSign === "-", expDigits);
    if (exact === undefined) return undefined;
    value = exact;
  } else if (fracDigits !== undefined) {
    const parsed = parseDecimalToMinor(`${intDigits}.${fracDigits}`, exponent);
    if (!parsed.ok) return undefined;
    value = BigInt(parsed.minor);
  } else {
    value = BigInt(intDigits);
  }

  if (value > MAX_AMOUNT_BIG) return undefined;
  if (sign === "-" && value !== 0n) return undefined;
  return Number(value);
}

/**
 * Exact value of `mantissa * 10^(±exp - fracLen)` when it is a non-negative
 * integer no larger than ~1e20; undefined when it is not an integer or is too large.
 */
function exactIntegerValue(mantissa: string, fracLen: number, negativeExp: boolean, expDigits: string): bigint | undefined {
  const digits = mantissa.replace(/^0+/, "");
  if (digits === "") return 0n; // 0e999, 0.0e-5
  const expTrimmed = expDigits.replace(/^0+/, "") || "0";
  if (expTrimmed.length > 6) return undefined; // |exp| >= 1e6: non-zero value is huge or tiny
  const shift = (negativeExp ? -Number(expTrimmed) : Number(expTrimmed)) - fracLen;
  if (shift >= 0) {
    if (digits.length + shift > 20) return undefined;
    return BigInt(digits + "0".repeat(shift));
  }
  const drop = -shift;
  if (drop > digits.length) return undefined; // would need more trailing zeros than there are digits
  const dropped = digits.slice(digits.length - drop);
  if (/[^0]/.test(dropped)) return undefined;
  const kept = digits.slice(0, digits.length - drop);
  if (kept.length > 20) return undefined;
  return BigInt(kept || "0");
}
