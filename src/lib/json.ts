// JSON bodies are parsed once, here, keeping the source text of every number that was not
// written as a plain integer. JSON.parse turns `100.00` into 100; the source text lets the API
// refuse a decimal where an integer amount is required, and read decimal prices exactly.
const decimalSources = new WeakMap<object, Map<string, string>>();
const INTEGER_LITERAL = /^-?(0|[1-9]\d*)$/;

export function parseJson(text: string): unknown {
  return JSON.parse(text, function (this: object, key: string, value: unknown, context?: { source?: string }) {
    if (typeof value === "number" && context?.source !== undefined && !INTEGER_LITERAL.test(context.source)) {
      let sources = decimalSources.get(this);
      if (!sources) decimalSources.set(this, (sources = new Map()));
      sources.set(key, context.source);
    }
    return value;
  });
}

/** The source text of `holder[key]` when it was sent as a non-integer number literal. */
export function decimalLiteral(holder: unknown, key: string | number): string | undefined {
  if (typeof holder !== "object" || holder === null) return undefined;
  return decimalSources.get(holder)?.get(String(key));
}

/** The exact text of a number as it was sent: its source for decimals, else its integer form. */
export function numberSource(holder: unknown, key: string | number): string | undefined {
  const value = (holder as Record<string, unknown> | null)?.[key];
  if (typeof value !== "number") return undefined;
  return decimalLiteral(holder, key) ?? (Number.isSafeInteger(value) ? String(value) : undefined);
}
