/**
 * Metered usage: which period a usage record falls in, how a period's records aggregate
 * (`sum`, `max`, `last_during_period`), and the period's line priced through the plan.
 * Pure: no I/O, no clock.
 *
 * Records follow Stripe's usage records: each has a timestamp (whole seconds count) and an action.
 * `increment` adds its quantity to the usage at its timestamp; `set` replaces the usage at its
 * timestamp. Records at one timestamp apply in the order given (the order they were recorded).
 * Then, over the timestamps within [periodStart, periodEnd):
 *  - sum: the usages added up;
 *  - max: the largest usage at any timestamp;
 *  - last_during_period: the usage at the latest timestamp.
 * A period without records aggregates to 0 and is priced at 0.
 */
import { addIntervals, periodIndexAt, type BillingInterval } from "./billing-calendar";
import { fromMinorUnits, roundToMinor, type MinorDecimal } from "./decimal";
import { MAX_AMOUNT } from "./money";
import { SECOND_MS, toEpochMs, type Instant } from "./instants";
import { priceExact, type ExactPriceInput, type PricingModel } from "./pricing";

export type AggregateUsage = "sum" | "max" | "last_during_period";
export type UsageAction = "increment" | "set";

export interface UsageRecord {
  /** Non-negative safe integer. */
  quantity: number;
  timestamp: Instant;
  action: UsageAction;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function assertRecord(r: UsageRecord, i: number): void {
  if (r === null || typeof r !== "object") throw new RangeError(`records[${i}] must be an object`);
  if (!Number.isSafeInteger(r.quantity) || r.quantity < 0) {
    throw new RangeError(`records[${i}].quantity must be a non-negative safe integer; got ${String(r.quantity)}`);
  }
  if (r.action !== "increment" && r.action !== "set") {
    throw new RangeError(`records[${i}].action must be increment or set; got ${JSON.stringify(r.action)}`);
  }
}

/**
 * The usage quantity of the period [periodStart, periodEnd) under `aggregate`. Records outside the
 * period are ignored. Throws RangeError on an invalid record or aggregate, or when a usage or the
 * sum overflows a safe integer.
 */
export function aggregateUsage(
  records: readonly UsageRecord[],
  aggregate: AggregateUsage,
  period: { start: Instant; end: Instant },
): number {
  if (aggregate !== "sum" && aggregate !== "max" && aggregate !== "last_during_period") {
    throw new RangeError(`aggregate_usage must be sum, max or last_during_period; got ${JSON.stringify(aggregate)}`);
  }
  const start = toEpochMs(period.start, "period.start");
  const end = toEpochMs(period.end, "period.end");
  if (!(start < end)) throw new RangeError("the period must end after it starts");

  const bySecond = new Map<number, bigint>();
  records.forEach((r, i) => {
    assertRecord(r, i);
    const at = toEpochMs(r.timestamp, `records[${i}].timestamp`);
    if (at < start || at >= end) return;
    const second = Math.floor(at / SECOND_MS);
    const q = BigInt(r.quantity);
    const next = r.action === "set" ? q : (bySecond.get(second) ?? 0n) + q;
    if (next > MAX_SAFE) throw new RangeError(`usage at ${new Date(second * SECOND_MS).toISOString()} overflows a safe integer`);
    bySecond.set(second, next);
  });
  if (bySecond.size === 0) return 0;

  let result = 0n;
  if (aggregate === "sum") {
    for (const v of bySecond.values()) result += v;
  } else if (aggregate === "max") {
    for (const v of bySecond.values()) if (v > result) result = v;
  } else {
    let latest = Number.NEGATIVE_INFINITY;
    for (const second of bySecond.keys()) if (second > latest) latest = second;
    result = bySecond.get(latest)!;
  }
  if (result > MAX_SAFE) throw new RangeError("the period's usage overflows a safe integer");
  return Number(result);
}

/**
 * The billing period holding `at` for a subscription anchored at `anchor`: [start, end) in epoch
 * ms, and its index (0 = the period that starts at the anchor). Throws RangeError before the anchor.
 */
export function usagePeriodAt(
  anchor: Instant,
  interval: BillingInterval,
  at: Instant,
): { index: number; start: number; end: number } {
  const anchorMs = toEpochMs(anchor, "anchor");
  const atMs = toEpochMs(at, "timestamp");
  if (atMs < anchorMs) throw new RangeError("the timestamp is before the subscription's first period");
  const anchorDate = new Date(anchorMs);
  const index = periodIndexAt(anchorDate, interval, new Date(atMs));
  return {
    index,
    start: addIntervals(anchorDate, interval, index).getTime(),
    end: addIntervals(anchorDate, interval, index + 1).getTime(),
  };
}

/**
 * A metered period's line: the aggregated quantity priced through the plan (its unit price or
 * tiers, exactly), rounded once, half away from zero. 1,000 units at "0.35" is 350.
 */
export function meteredLine(input: {
  records: readonly UsageRecord[];
  aggregate: AggregateUsage;
  period: { start: Instant; end: Instant };
  pricingModel: PricingModel;
  price: ExactPriceInput;
}): { quantity: number; exactAmount: MinorDecimal; amount: number } {
  const quantity = aggregateUsage(input.records, input.aggregate, input.period);
  const exactAmount = priceExact(input.pricingModel, input.price, quantity);
  return { quantity, exactAmount, amount: roundToMinor(exactAmount) };
}

/**
 * The largest usage Q such that every usage from 0 to Q prices, rounded, at no more than
 * `maxAmount` minor units (MAX_AMOUNT, the largest chargeable amount); Number.MAX_SAFE_INTEGER
 * when no usage goes beyond it. A period's aggregated usage never exceeds the sum of its records'
 * quantities (whatever their actions and the aggregate), so a period whose quantities add up to at
 * most Q is always chargeable: the usage endpoint refuses a record that would take them past it.
 *
 * The price is non-decreasing in the usage under "fixed" and "graduated", and within each tier
 * under "volume" (whose price may fall at a tier's boundary), so each such range is searched by
 * bisection and the first usage beyond `maxAmount` is found exactly.
 */
export function largestBillableUsage(model: PricingModel, price: ExactPriceInput, maxAmount: number = MAX_AMOUNT): number {
  // A rounded price is at most maxAmount exactly when the exact price is below maxAmount + 1/2.
  const limitTwice = fromMinorUnits(maxAmount).scaled * 2n + fromMinorUnits(1).scaled;
  const fits = (q: number) => priceExact(model, price, q).scaled * 2n < limitTwice;
  const ranges: [number, number][] = [];
  if (model === "volume" && price.tiers) {
    let from = 1;
    for (const tier of price.tiers) {
      const to = tier.upTo ?? Number.MAX_SAFE_INTEGER;
      ranges.push([from, to]);
      from = to + 1;
    }
  } else {
    ranges.push([0, Number.MAX_SAFE_INTEGER]);
  }
  for (const [lo, hi] of ranges) {
    if (!fits(lo)) return lo - 1;
    if (fits(hi)) continue;
    // fits(low) holds and fits(high) does not: narrow down to neighbours.
    let low = lo;
    let high = hi;
    while (high - low > 1) {
      const mid = low + Math.floor((high - low) / 2);
      if (fits(mid)) low = mid;
      else high = mid;
    }
    return low;
  }
  return Number.MAX_SAFE_INTEGER;
}
