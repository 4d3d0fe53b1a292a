// Credit notes in the dashboard: a read-only list (issue and void them through the API,
// POST /credit-notes and POST /credit-notes/{id}/void), each with its PDF (passed through as the
// API made it). An invoice's page lists its own (src/dashboard/pages/invoices.tsx CreditNotesOf).
import type { Context, Hono } from "hono";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { apiErrorPage } from "../actions";
import { Id, Money, Time } from "../format";
import { Empty, Pager, StatusBadge, TableWrap, render } from "../layout";
import { apiQuery, listQuery } from "../lists";
import type { CreditNoteJson } from "../../billing/credit-notes";

const BACK = "/dashboard/credit-notes";

/** A table of credit notes: number, invoice, amount and tax, how it was paid out, status. */
export function CreditNoteTable({ notes }: { notes: CreditNoteJson[] }) {
  return (
    <TableWrap>
      <table>
        <thead>
          <tr>
            <th>Credit note</th>
            <th>Invoice</th>
            <th class="num">Amount</th>
            <th class="num">Tax</th>
            <th>Paid out</th>
            <th>Reason</th>
            <th>Status</th>
            <th>Issued</th>
          </tr>
        </thead>
        <tbody>
          {notes.map((note) => (
            <tr data-credit-note={note.id} id={`credit-note-${note.id}`}>
              <td>
                <a href={`${BACK}/${encodeURIComponent(note.id)}/pdf`}>{note.number}</a>
                <div class="muted">
                  <Id id={note.id} />
                </div>
              </td>
              <td>
                <Id id={note.invoice_id} href={`/dashboard/invoices/${encodeURIComponent(note.invoice_id)}`} />
              </td>
              <td class="num">
                <Money minor={note.amount} currency={note.currency} />
              </td>
              <td class="num">
                <Money minor={note.tax} currency={note.currency} />
              </td>
              <td>{note.refund_id ? <>refund <Id id={note.refund_id} /></> : "customer balance"}</td>
              <td>{note.reason ?? "—"}</td>
              <td>
                <StatusBadge status={note.status} />
              </td>
              <td>
                <Time iso={note.created_at} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

async function listPage(c: Context<DashEnv>) {
  const query = listQuery(c);
  const answer = await c.var.api<Page<CreditNoteJson>>("/credit-notes", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read credit notes", "/dashboard");
  const page = answer.body;
  return render(c, 200, {
    title: "Credit notes",
    active: BACK,
    children: (
      <section class="panel">
        {page.data.length === 0 ? (
          <Empty title="No credit notes yet">Issue one for a finalized invoice with POST /credit-notes, or refund an invoiced payment.</Empty>
        ) : (
          <CreditNoteTable notes={page.data} />
        )}
        <Pager page={page} query={query} base={BACK} />
      </section>
    ),
  });
}

async function pdf(c: Context<DashEnv>) {
  const id = c.req.param("id")!;
  const answer = await c.var.api<never>(`/credit-notes/${encodeURIComponent(id)}/pdf`, { accept: "application/pdf" });
  if (!answer.ok) return apiErrorPage(c, answer, "open this credit note's PDF", BACK);
  return new Response(answer.raw.bytes, {
    headers: {
      "Content-Type": "application/pdf",
      "Content-Disposition": answer.raw.headers.get("content-disposition") ?? "inline",
      "Cache-Control": "private, no-store",
    },
  });
}

export function registerCreditNotePages(dash: Hono<DashEnv>) {
  dash.get("/credit-notes", (c) => listPage(c));
  dash.get("/credit-notes/:id/pdf", pdf);
}
