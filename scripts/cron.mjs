// The cron expressions of wrangler.toml's [triggers], read as Cloudflare reads them, so that
// `npm run dev` (scripts/dev.mjs) fires the scheduled handler when production would: five fields
// (minute, hour, day of month, month, day of week) in UTC; `*`, `?`, lists, ranges and steps; months
// 1-12 or JAN-DEC, days of the week 1-7 or SUN-SAT (1 is Sunday). `L`, `W` and `#` are refused.

const MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const FIELDS = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12, names: MONTHS },
  { name: "day of week", min: 1, max: 7, names: WEEKDAYS },
];

/** Parses a cron expression; answers whether it fires in the UTC minute that holds `date`. */
export function parseCron(expression) {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5) throw new Error(`cron "${expression}": expected 5 fields (minute hour day-of-month month day-of-week), got ${parts.length}`);
  const [minutes, hours, days, months, weekdays] = parts.map((part, i) => parseField(part, FIELDS[i], expression));
  const anyDay = parts[2] === "*" || parts[2] === "?";
  const anyWeekday = parts[4] === "*" || parts[4] === "?";
  return (date) => {
    const dayMatches = days.has(date.getUTCDate());
    const weekdayMatches = weekdays.has(date.getUTCDay() + 1);
    // As in every cron: with both day fields restricted, either one may match.
    const day = anyDay || anyWeekday ? dayMatches && weekdayMatches : dayMatches || weekdayMatches;
    return day && minutes.has(date.getUTCMinutes()) && hours.has(date.getUTCHours()) && months.has(date.getUTCMonth() + 1);
  };
}

function parseField(text, field, expression) {
  const fail = (why) => new Error(`cron "${expression}": ${field.name} "${text}" ${why}`);
  const value = (token) => {
    const named = field.names?.indexOf(token.toUpperCase()) ?? -1;
    const n = named >= 0 ? named + 1 : /^\d+$/.test(token) ? Number(token) : NaN;
    if (!(n >= field.min && n <= field.max)) throw fail(`is not ${field.min}-${field.max}${field.names ? ` or ${field.names[0]}-${field.names.at(-1)}` : ""}`);
    return n;
  };
  const values = new Set();
  for (const item of text.split(",")) {
    const match = /^(\*|\?|[A-Za-z0-9]+)(?:-([A-Za-z0-9]+))?(?:\/(\d+))?$/.exec(item);
    if (!match) throw fail("is not supported locally (only *, ?, lists, ranges and steps)");
    const [, start, end, step] = match;
    const whole = start === "*" || start === "?";
    if (whole && end) throw fail("is not a valid range");
    const from = whole ? field.min : value(start);
    const to = whole || (step && !end) ? field.max : end ? value(end) : from;
    const by = step ? Number(step) : 1;
    if (by < 1 || from > to) throw fail("is an empty range");
    for (let n = from; n <= to; n += by) values.add(n);
  }
  return values;
}
