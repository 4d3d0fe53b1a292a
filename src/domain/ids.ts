// Prefixed, time-ordered identifiers: `usr_` + 10 characters of millisecond time + 16 characters
// of randomness, in lowercase Crockford base32, so that sorting ids sorts by creation time.
import { toHex } from "../lib/crypto";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export const ID_PREFIXES = {
  account: "acct",
  apiKey: "key",
  accessToken: "atk",
  user: "usr",
  payout: "po",
  plan: "plan",
  subscription: "sub",
  period: "sper",
  webhookEndpoint: "whk",
  event: "evt",
  delivery: "dlv",
  webhookRecovery: "rcv",
  attempt: "att",
  payment: "pay",
  paymentMethod: "pmt",
  checkoutSession: "cs",
  portalSession: "bps",
  refund: "re",
  testClock: "clock",
  invoice: "in",
  invoiceLine: "il",
  creditNote: "cn",
  creditNoteLine: "cnli",
  balanceTransaction: "cbtxn",
  invoiceItem: "ii",
  prorationCharge: "prc",
  coupon: "co",
  taxRate: "txr",
  couponRedemption: "cr",
  usageRecord: "mbur",
} as const;
export type IdKind = keyof typeof ID_PREFIXES;

// Random bytes come from the CSPRNG 4 KB at a time, one call per 256 ids rather than one per id
// (a request id is made for every request).
const pool = new Uint8Array(4096);
let poolUsed = pool.length;

function randomBytes(n: number): Uint8Array {
  if (poolUsed + n > pool.length) {
    crypto.getRandomValues(pool);
    poolUsed = 0;
  }
  const bytes = pool.slice(poolUsed, poolUsed + n);
  poolUsed += n;
  return bytes;
}

let lastTime = -1;
let lastRandom: number[] = [];

function encodeTime(ms: number): string {
  let out = "";
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

function randomDigits(): number[] {
  const bytes = randomBytes(16);
  return Array.from(bytes, (b) => b & 31);
}

/** Within one millisecond, ids from this isolate still increase: the random part is incremented. */
function nextRandom(ms: number): number[] {
  if (ms !== lastTime) {
    lastTime = ms;
    lastRandom = randomDigits();
    return lastRandom;
  }
  const next = lastRandom.slice();
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i] < 31) {
      next[i]++;
      break;
    }
    next[i] = 0;
  }
  lastRandom = next;
  return next;
}

export function newId(kind: IdKind, now: number): string {
  const ms = Math.max(now, lastTime);
  return `${ID_PREFIXES[kind]}_${encodeTime(ms)}${nextRandom(ms).map((d) => ALPHABET[d]).join("")}`;
}

export function hasPrefix(id: string, kind: IdKind): boolean {
  return new RegExp(`^${ID_PREFIXES[kind]}_[0-9a-hjkmnp-tv-z]{26}$`).test(id);
}

/** RFC 9562 UUID version 7: 48 bits of Unix milliseconds, then random bits. */
export function uuidv7(now: number): string {
  const hex = uuidv7Hex(now);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The UUIDv7 of `now` as 32 hex digits, without the dashes (the request id's form). */
export function uuidv7Hex(now: number): string {
  const bytes = randomBytes(16);
  let ms = now;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = (bytes[6] & 0x0f) | 0x70;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  return toHex(bytes);
}
