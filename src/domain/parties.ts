// The parties an invoice names (DESIGN.md "Books that close"): a postal address (the seller's, on
// the account; the buyer's, on the user) and the buyer's tax ids. Pure: the closed lists (ISO
// 3166-1 alpha-2 countries, the tax id types) and the loose check of a tax id's form.
//
// A tax id's value is checked loosely, as Stripe does before it verifies one: its form for the
// type (letters and digits where the type has them, the right length), after spaces, dots and
// hyphens are taken out. Whether the number is registered is for the tax authority, not for us.

/** A postal address, as Stripe's `address`: every part optional, the country ISO 3166-1 alpha-2 (upper case). */
export interface PostalAddress {
  line1: string | null;
  line2: string | null;
  city: string | null;
  postal_code: string | null;
  state: string | null;
  country: string | null;
}

export const ADDRESS_PARTS = ["line1", "line2", "city", "postal_code", "state", "country"] as const;

/** A buyer's tax id: `{ type: "eu_vat", value: "DE123456789" }`. */
export interface TaxIdValue {
  type: TaxIdType;
  value: string;
}

/** ISO 3166-1 alpha-2, every officially assigned code, and XK (Kosovo), which Stripe takes too. */
export const COUNTRIES: ReadonlySet<string> = new Set(
  (
    "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ " +
    "CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR " +
    "GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT " +
    "JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY " +
    "MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM " +
    "PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ " +
    "TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS XK YE YT ZA ZM ZW"
  ).split(" "),
);

/** Whether `code` (any case) is an ISO 3166-1 alpha-2 country. */
export const isCountry = (code: string) => COUNTRIES.has(code.toUpperCase());

/**
 * The tax id types a buyer's id may have (Stripe's names), each with the loose form of its value
 * (spaces, dots and hyphens taken out, upper case) and an example for the message.
 */
export const TAX_ID_TYPES = {
  eu_vat: { label: "EU VAT", form: /^(AT|BE|BG|CY|CZ|DE|DK|EE|EL|ES|FI|FR|HR|HU|IE|IT|LT|LU|LV|MT|NL|PL|PT|RO|SE|SI|SK|XI)[0-9A-Z+*]{2,12}$/, example: "DE123456789" },
  gb_vat: { label: "GB VAT", form: /^GB(\d{9}|\d{12}|GD\d{3}|HA\d{3})$/, example: "GB123456789" },
  us_ein: { label: "US EIN", form: /^\d{9}$/, example: "12-3456789" },
  au_abn: { label: "AU ABN", form: /^\d{11}$/, example: "12345678912" },
  ca_bn: { label: "CA BN", form: /^\d{9}$/, example: "123456789" },
  ch_vat: { label: "CH VAT", form: /^CHE\d{9}(MWST|TVA|IVA)?$/, example: "CHE-123.456.789 MWST" },
  no_vat: { label: "NO VAT", form: /^(NO)?\d{9}(MVA)?$/, example: "123456789MVA" },
  in_gst: { label: "IN GST", form: /^\d{2}[A-Z]{5}\d{4}[A-Z][1-9A-Z]Z[0-9A-Z]$/, example: "12ABCDE3456FGZH" },
  jp_cn: { label: "JP CN", form: /^\d{13}$/, example: "1234567891234" },
  nz_gst: { label: "NZ GST", form: /^\d{8,9}$/, example: "123456789" },
  za_vat: { label: "ZA VAT", form: /^4\d{9}$/, example: "4123456789" },
} as const;

export type TaxIdType = keyof typeof TAX_ID_TYPES;
export const TAX_ID_TYPE_NAMES = Object.keys(TAX_ID_TYPES) as [TaxIdType, ...TaxIdType[]];
/** At most this many tax ids per buyer (Stripe's limit on a customer's tax ids is higher; an invoice prints them all). */
export const MAX_TAX_IDS = 5;

/** Whether `value` has the form of a tax id of `type` (loosely: see the header). */
export function taxIdFormOk(type: TaxIdType, value: string): boolean {
  return TAX_ID_TYPES[type].form.test(value.replace(/[\s.\-]/g, "").toUpperCase());
}

/** What an invoice prints for a tax id: "EU VAT DE123456789". */
export const taxIdLabel = (taxId: TaxIdValue) => `${TAX_ID_TYPES[taxId.type]?.label ?? taxId.type} ${taxId.value}`;

/** An address as stored: every part present (null where not given), the country upper case; null when it has no part at all. */
export function storedAddress(address: Partial<Record<(typeof ADDRESS_PARTS)[number], string | null>> | null | undefined): PostalAddress | null {
  if (!address) return null;
  const stored = Object.fromEntries(ADDRESS_PARTS.map((part) => [part, address[part] ?? null])) as unknown as PostalAddress;
  if (stored.country) stored.country = stored.country.toUpperCase();
  return ADDRESS_PARTS.some((part) => stored[part] !== null) ? stored : null;
}

/**
 * An address as printed, one line each: line1, line2, "postal_code city", state, country. Empty
 * parts are left out, so a partial address prints as what it has.
 */
export function addressLines(address: PostalAddress | null): string[] {
  if (!address) return [];
  const cityLine = [address.postal_code, address.city].filter(Boolean).join(" ");
  return [address.line1, address.line2, cityLine, address.state, address.country].filter((line): line is string => typeof line === "string" && line.trim() !== "");
}
