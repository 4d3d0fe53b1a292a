// JSON bodies are parsed once, here, keeping the source text of every number that was not
// written as a plain integer, or that is an integer too large for a double to hold exactly.
// JSON.parse turns `100.00` into 100; the source text lets the API refuse a decimal where an
// integer amount is required, read decimal prices exactly, and scan a 19-digit number for a card.
const decimalSources = new WeakMap<object, Map<string, string>>();
const INTEGER_LITERAL = /^-?(0|[1-9]\d*)$/;

export function parseJson(text: string): unknown {
  return JSON.parse(text, function (this: object, key: string, value: unknown, context?: { source?: string }) {
    if (typeof value === "number" && context?.source !== undefined && (!INTEGER_LITERAL.test(context.source) || !Number.isSafeInteger(value))) {
      let sources = decimalSources.get(this);
      if (!sources) decimalSources.set(this, (sources = new Map()));
      sources.set(key, context.source);
    }
    return value;
  });
}

const sourceOf = (holder: unknown, key: string | number) =>
  typeof holder === "object" && holder !== null ? decimalSources.get(holder)?.get(String(key)) : undefined;

/** The source text of `holder[key]` when it was sent as a non-integer number literal. */
export function decimalLiteral(holder: unknown, key: string | number): string | undefined {
  const source = sourceOf(holder, key);
  return source !== undefined && !INTEGER_LITERAL.test(source) ? source : undefined;
}

/** The exact text of a number as it was sent: its source for decimals and unsafe integers, else its integer form. */
export function numberSource(holder: unknown, key: string | number): string | undefined {
  const value = (holder as Record<string, unknown> | null)?.[key];
  if (typeof value !== "number") return undefined;
  return sourceOf(holder, key) ?? (Number.isSafeInteger(value) ? String(value) : undefined);
}
