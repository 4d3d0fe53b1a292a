// Formatting for the dashboard: amounts in major units with each currency's ISO 4217 exponent
// (src/domain/money.ts: JPY 0, USD 2, KWD 3), never through floating point; and times shown in
// UTC, with the reader's local time on hover (the title attribute, filled in by dashboard.js from
// the machine-readable datetime; without JavaScript the title repeats the exact UTC instant).
import { CURRENCY_EXPONENTS, normalizeCurrency, parseDecimalToMinor } from "../domain/money";

import { formatMoney } from "../domain/money";

export { formatMoney };

/** The number of decimals a currency's major unit has, or undefined for an unknown code. */
export function currencyDecimals(currency: string): number | undefined {
  const code = normalizeCurrency(currency);
  return code === undefined ? undefined : CURRENCY_EXPONENTS[code];
}

/**
 * A decimal typed in major units ("5", "5.5", "5.50") as minor units of `currency`, or the reason
 * it cannot be: the refund form asks for major units, the API takes minor units.
 */
export function majorToMinor(text: string, currency: string): { ok: true; minor: number } | { ok: false; message: string } {
  const decimals = currencyDecimals(currency);
  if (decimals === undefined) return { ok: false, message: `Unknown currency '${currency}'.` };
  const parsed = parseDecimalToMinor(text.trim().replaceAll(",", ""), decimals);
  if (parsed.ok) return parsed;
  const code = currency.toUpperCase();
  const message = {
    format: `'${text}' is not an amount: write digits with an optional decimal point, such as ${decimals ? `12.${"5".padEnd(decimals, "0")}` : "1200"}.`,
    too_many_decimals: `${code} has ${decimals} decimal${decimals === 1 ? "" : "s"}: '${text}' has more.`,
    out_of_range: `'${text}' is larger than any amount Tender accepts.`,
  }[parsed.reason];
  return { ok: false, message };
}

/** "2026-11-21T12:00:00.000Z" -> "2026-11-21 12:00:00 UTC". */
export function formatUtc(iso: string): string {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** A time in UTC; the local time appears on hover. In a narrow column the time of day wraps under the date. */
export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  const text = formatUtc(iso);
  const space = text.indexOf(" ");
  return (
    <time datetime={iso} title={iso}>
      {space < 0 ? (
        text
      ) : (
        <>
          <span>{text.slice(0, space)}</span> <span>{text.slice(space + 1)}</span>
        </>
      )}
    </time>
  );
}

/** An amount in major units, with the minor-unit integer on hover (the integer is the truth). */
export function Money({ minor, currency }: { minor: number; currency: string }) {
  return (
    <span class="money" title={`${minor} (${currency.toLowerCase()}, minor units)`}>
      {formatMoney(minor, currency)}
    </span>
  );
}

/** How many characters of an id's end stay visible when it is cut short. */
const ID_TAIL = 6;
/** Ids up to this length are shown whole. */
const ID_WHOLE = 18;

/**
 * An object's id, cut short in the middle when long: its start, an ellipsis, and its last
 * characters (ids made in the same millisecond share their start and differ at the end). The full
 * id is the element's title (on hover) and its text, so selecting or double-clicking it copies it
 * whole. `distinctEnd` says where the part that tells ids apart ends, when the rest is shared by
 * every row (a delivery id ends with its endpoint's id): that rest is kept in the text but not shown.
 */
export function Id({ id, href, distinctEnd }: { id: string; href?: string; distinctEnd?: number }) {
  const end = Math.min(distinctEnd ?? id.length, id.length);
  const body =
    id.length <= ID_WHOLE ? (
      id
    ) : (
      <>
        <span class="id-head">{id.slice(0, end - ID_TAIL)}</span>
        <span class="id-tail">{id.slice(end - ID_TAIL, end)}</span>
        {end < id.length ? <span class="id-rest">{id.slice(end)}</span> : null}
      </>
    );
  return href ? (
    <a href={href} class="id" title={id}>
      {body}
    </a>
  ) : (
    <span class="id" title={id}>
      {body}
    </span>
  );
}

/**
 * An email that a line may break only before its "@" or a ".", or after a hyphen: never mid-word. The
 * break opportunities are <wbr> elements, so the text (and a copy of it) is the email, whole.
 */
export function Email({ email }: { email: string }) {
  const parts = email.split(/(?=[@.])/);
  return (
    <span class="email">
      {parts.map((part, i) => (
        <>
          {i > 0 ? <wbr /> : null}
          {part}
        </>
      ))}
    </span>
  );
}

/** A payment card as brand and last 4. */
export const cardText = (card: { brand: string; last4: string }) => `${card.brand} •••• ${card.last4}`;
