// Invoices: the list (filter by status), an invoice's page with its lines and totals, its PDF
// (GET /invoices/{id}/pdf, passed through as the API made it), and for an open invoice: pay now
// (POST /invoices/{id}/pay, the period's next attempt) or void (POST /invoices/{id}/void, the
// period forgiven). Every action goes through the API's own routes as the session's key. The
// customer shown is the one the invoice names (copied when it was finalized), not the user as it is
// now: a rename never changes what an issued invoice says.
import type { Context, Hono } from "hono";
import { act, apiErrorPage, redirectWithNotice } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time } from "../format";
import { Empty, FormFields, Pager, StatusBadge, StatusFilter, TableWrap, can, render } from "../layout";
import { apiQuery, listQuery } from "../lists";
import { CreditNoteTable } from "./credit-notes";
import type { CreditNoteJson } from "../../billing/credit-notes";
import { Fact } from "../details";
import { type PostalAddress, type TaxIdValue, addressLines, taxIdLabel } from "../../domain/parties";

/** A party's lines (address, tax ids), one per line. */
function Lines({ lines }: { lines: string[] }) {
  return (
    <>
      {lines.map((line) => (
        <div class="muted wrap">{line}</div>
      ))}
    </>
  );
}

/** The seller and the buyer as the invoice names them (copied when it was finalized; live on a draft). */
function Parties({ invoice }: { invoice: Invoice }) {
  return (
    <dl class="facts" data-parties>
      <Fact term="From" data-seller>
        <span class="wrap">{invoice.account_name}</span>
        <Lines lines={[...addressLines(invoice.account_address), ...invoice.account_tax_ids.map((id) => `Tax ID ${id}`), ...(invoice.account_email ? [invoice.account_email] : [])]} />
      </Fact>
      <Fact term="Bill to" data-buyer>
        <span class="wrap">{invoice.customer_name ?? "—"}</span>
        <Lines lines={[...(invoice.customer_email ? [invoice.customer_email] : []), ...addressLines(invoice.customer_address), ...invoice.customer_tax_ids.map(taxIdLabel)]} />
      </Fact>
      {invoice.footer ? (
        <Fact term="Footer" data-footer>
          <span class="wrap">{invoice.footer}</span>
        </Fact>
      ) : null}
    </dl>
  );
}

interface InvoiceLine {
  id: string;
  type: string;
  description: string;
  quantity: number;
  amount: number;
  period_start: string;
  period_end: string;
}

interface Invoice {
  id: string;
  livemode: boolean;
  number: string | null;
  status: string;
  subscription_id: string | null;
  user_id: string | null;
  customer_name: string | null;
  customer_email: string | null;
  customer_address: PostalAddress | null;
  customer_tax_ids: TaxIdValue[];
  account_name: string | null;
  account_email: string | null;
  account_address: PostalAddress | null;
  account_tax_ids: string[];
  footer: string | null;
  coupon: { id: string; name: string | null } | null;
  test_clock: string | null;
  currency: string;
  period_start: string;
  period_end: string;
  lines: InvoiceLine[];
  subtotal: number;
  discount: number;
  tax: number;
  total_tax_amounts: { tax_rate: string; amount: number; inclusive: boolean; display_name: string | null; percentage: string }[];
  total: number;
  amount_paid: number;
  amount_due: number;
  starting_balance: number;
  ending_balance: number;
  payment_id: string | null;
  created_at: string;
  finalized_at: string | null;
  paid_at: string | null;
}

const BACK = "/dashboard/invoices";
const STATUSES = ["draft", "open", "paid", "uncollectible", "void"];
const pageOf = (id: string) => `${BACK}/${encodeURIComponent(id)}`;

/** The customer as the invoice names them, the user's id on hover. */
function BilledTo({ invoice }: { invoice: Pick<Invoice, "user_id" | "customer_name" | "customer_email"> }) {
  if (invoice.customer_name === null && invoice.customer_email === null) return invoice.user_id ? <Id id={invoice.user_id} /> : <span class="muted">—</span>;
  return (
    <div class="ref" title={invoice.user_id ?? undefined} data-billed-to={invoice.user_id ?? ""}>
      <span class="wrap">{invoice.customer_name}</span>
      <div class="muted wrap">{invoice.customer_email}</div>
    </div>
  );
}

async function listPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const query = listQuery(c, ["status", "subscription_id", "user_id"]);
  const answer = await c.var.api<Page<Invoice>>("/invoices", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read invoices", "/dashboard");
  const page = answer.body;
  return render(c, 200, {
    title: "Invoices",
    active: BACK,
    children: (
      <section class="panel">
        <StatusFilter statuses={STATUSES} current={query.status} base={BACK} />
        {page.data.length === 0 ? (
          <Empty title="No invoices to show">Each subscription charge is for an invoice: the first period, each renewal.</Empty>
        ) : (
          <TableWrap>
            <table>
              <thead>
                <tr>
                  <th>Invoice</th>
                  <th>Customer</th>
                  <th class="num">Total</th>
                  <th>Status</th>
                  <th>Period</th>
                  <th>PDF</th>
                </tr>
              </thead>
              <tbody>
                {page.data.map((i) => (
                  <tr data-invoice={i.id}>
                    <td>
                      <a href={pageOf(i.id)}>{i.number ?? "Draft"}</a>
                      <div class="muted">
                        <Id id={i.id} />
                      </div>
                    </td>
                    <td>
                      <BilledTo invoice={i} />
                    </td>
                    <td class="num">
                      <Money minor={i.total} currency={i.currency} />
                    </td>
                    <td>
                      <StatusBadge status={i.status} />
                    </td>
                    <td class="nowrap">
                      <Time iso={i.period_start} /> – <Time iso={i.period_end} />
                    </td>
                    <td>
                      <a href={`${pageOf(i.id)}/pdf`}>PDF</a>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        )}
        <Pager page={page} query={query} base={BACK} />
      </section>
    ),
  });
}

async function invoicePage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const id = c.req.param("id")!;
  const answer = await c.var.api<Invoice>(`/invoices/${encodeURIComponent(id)}`);
  if (!answer.ok) return apiErrorPage(c, answer, "read this invoice", BACK);
  const invoice = answer.body;
  const write = can(session, "invoices:write") && invoice.status === "open";
  // Its credit notes, when the session may read them.
  const notes = can(session, "credit_notes:read") ? await c.var.api<Page<CreditNoteJson>>("/credit-notes", { query: { invoice_id: invoice.id, limit: "100" } }) : null;
  return render(c, 200, {
    title: `Invoice ${invoice.number ?? "(draft)"}`,
    active: BACK,
    children: (
      <>
        <section class="panel" data-invoice={invoice.id}>
          <p>
            <StatusBadge status={invoice.status} /> <BilledTo invoice={invoice} /> · <a href={`${pageOf(invoice.id)}/pdf`}>PDF</a>
          </p>
          <Parties invoice={invoice} />
          <TableWrap>
            <table>
              <thead>
                <tr>
                  <th>Line</th>
                  <th class="num">Quantity</th>
                  <th>Period</th>
                  <th class="num">Amount</th>
                </tr>
              </thead>
              <tbody>
                {invoice.lines.map((line) => (
                  <tr data-line={line.id}>
                    <td>{line.description}</td>
                    <td class="num">{line.quantity}</td>
                    <td class="nowrap">
                      <Time iso={line.period_start} /> – <Time iso={line.period_end} />
                    </td>
                    <td class="num">
                      <Money minor={line.amount} currency={invoice.currency} />
                    </td>
                  </tr>
                ))}
              </tbody>
              <tfoot>
                {(
                  [
                    ["Subtotal", invoice.subtotal],
                    [invoice.coupon ? `Discount (${invoice.coupon.name ?? invoice.coupon.id})` : "Discount", -invoice.discount],
                    // A row per tax rate, as issued.
                    ...invoice.total_tax_amounts.map((t) => [`${t.display_name ?? "Tax"} ${t.percentage}%${t.inclusive ? " (included)" : ""}`, t.amount] as const),
                    ["Total", invoice.total],
                    // The user's balance, when the invoice found or left one (negative is a credit).
                    ...(invoice.starting_balance !== 0 || invoice.ending_balance !== 0
                      ? ([
                          ["Applied balance", -(invoice.ending_balance - invoice.starting_balance)],
                          ["Starting balance", invoice.starting_balance],
                          ["Ending balance", invoice.ending_balance],
                        ] as const)
                      : []),
                    ["Paid", invoice.amount_paid],
                    ["Due", invoice.amount_due],
                  ] as (readonly [string, number])[]
                ).map(([label, minor]) => (
                  <tr>
                    <th colspan={3}>{label}</th>
                    <td class="num" data-total={label.startsWith("Discount") ? "discount" : label.toLowerCase()}>
                      <Money minor={minor} currency={invoice.currency} />
                    </td>
                  </tr>
                ))}
              </tfoot>
            </table>
          </TableWrap>
          <p class="muted">
            Created <Time iso={invoice.created_at} />
            {invoice.paid_at ? (
              <>
                {" "}
                · paid <Time iso={invoice.paid_at} />
              </>
            ) : null}
            {invoice.subscription_id ? (
              <>
                {" "}
                · subscription <Id id={invoice.subscription_id} />
              </>
            ) : null}
          </p>
        </section>
        {notes?.ok && notes.body.data.length > 0 ? (
          <section class="panel" data-credit-notes={invoice.id}>
            <h2>Credit notes</h2>
            <CreditNoteTable notes={notes.body.data} />
          </section>
        ) : null}
        {write ? (
          <section class="panel">
            <form method="post" action={`${pageOf(invoice.id)}/pay`} class="inline">
              <FormFields session={session} />
              <button type="submit" class="primary">
                Pay now
              </button>
            </form>{" "}
            <form method="post" action={`${pageOf(invoice.id)}/void`} class="inline" data-confirm="Void this invoice? Its period is forgiven and never charged.">
              <FormFields session={session} />
              <button type="submit" class="danger">
                Void
              </button>
            </form>
          </section>
        ) : null}
        <p>
          <a href={BACK}>← All invoices</a>
        </p>
      </>
    ),
  });
}

async function pdf(c: Context<DashEnv>) {
  const id = c.req.param("id")!;
  const answer = await c.var.api<never>(`/invoices/${encodeURIComponent(id)}/pdf`, { accept: "application/pdf" });
  if (!answer.ok) return apiErrorPage(c, answer, "open this invoice's PDF", BACK);
  return new Response(answer.raw.bytes, {
    headers: {
      "Content-Type": "application/pdf",
      "Content-Disposition": answer.raw.headers.get("content-disposition") ?? "inline",
      "Cache-Control": "private, no-store",
    },
  });
}

export function registerInvoicePages(dash: Hono<DashEnv>) {
  dash.get("/invoices", (c) => listPage(c));
  dash.get("/invoices/:id", invoicePage);
  dash.get("/invoices/:id/pdf", pdf);
  for (const action of ["pay", "void"] as const) {
    dash.post(`/invoices/:id/${action}`, (c) => {
      const id = c.req.param("id")!;
      return act<Invoice>(c, {
        what: action === "pay" ? "pay this invoice" : "void this invoice",
        back: pageOf(id),
        send: (key) => c.var.api(`/invoices/${encodeURIComponent(id)}/${action}`, { method: "POST", idempotencyKey: key }),
        done: (invoice) => redirectWithNotice(c, pageOf(invoice.id), action === "pay" ? "invoice_paid" : "invoice_voided", invoice.number ?? invoice.id),
      });
    });
  }
}
