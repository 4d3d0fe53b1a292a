// The hosted invoice page's seller and buyer blocks (src/pages/invoice.tsx), and the card that
// paid an invoice, for its PDF there. What they show is what the invoice names: copied when it was
// finalized (src/billing/invoices.ts ISSUED_PARTY_COLUMNS), never the account or user as they are now.
import { sql } from "drizzle-orm";
import { INVOICE_PAID_WITH, type InvoiceJson } from "../billing/invoices";
import { type PaidWith, buyerLines, sellerLines } from "../billing/invoice-pdf";
import { createDb } from "../db/client";
import { invoices } from "../db/schema";
import { shardEnv, shardNumbers } from "../db/shards";
import type { Bindings } from "../env";

/** "From" the seller, "Bill to" the buyer: names, emails, addresses and tax ids, one line each. */
export function InvoiceParties({ invoice }: { invoice: InvoiceJson }) {
  const seller = [...sellerLines(invoice), ...(invoice.account_email ? [invoice.account_email] : [])];
  const buyer = [...(invoice.customer_email ? [invoice.customer_email] : []), ...buyerLines(invoice)];
  return (
    <div class="row" data-parties>
      <div data-seller>
        <p class="muted">From</p>
        <p>
          <strong>{invoice.account_name ?? "—"}</strong>
        </p>
        {seller.map((line) => (
          <p class="muted">{line}</p>
        ))}
      </div>
      <div data-buyer>
        <p class="muted">Bill to</p>
        <p>
          <strong>{invoice.customer_name ?? "—"}</strong>
        </p>
        {buyer.map((line) => (
          <p class="muted">{line}</p>
        ))}
      </div>
    </div>
  );
}

/** The seller's footer, as the invoice prints it (nothing when it has none). */
export function InvoiceFooter({ invoice }: { invoice: InvoiceJson }) {
  return invoice.footer ? (
    <p class="muted" data-footer>
      {invoice.footer}
    </p>
  ) : null;
}

/** The card of the payment that paid invoice `id` (on whichever shard holds it), or null. */
export async function paidWithOf(env: Bindings, id: string): Promise<PaidWith | null> {
  for (const shard of shardNumbers(env)) {
    const [row] = await createDb(shardEnv(env, shard).DB).all<{ paid_with: string | null }>(
      sql`SELECT ${INVOICE_PAID_WITH} AS paid_with FROM ${invoices} WHERE invoices.id = ${id} LIMIT 1`,
    );
    if (row) return row.paid_with === null ? null : (JSON.parse(row.paid_with) as PaidWith);
  }
  return null;
}
