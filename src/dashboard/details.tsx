// The pieces an object's page (a user, a payment, a payout, a subscription) is made of: the
// headline (amount and status), the facts list, the narrow tables of related objects (amount,
// status, id, created) and the link back to the list. Each renders exactly the markup the pages
// wrote out by hand before, so the pages, the styles and the tests read the same HTML.
import type { Child } from "hono/jsx";
import { Id, Money, Time } from "./format";
import { StatusBadge, TableWrap } from "./layout";

/** A column heading of a stacked table: its label, and "num" for a right-aligned amount. */
export type Column = string | { label: string; class: "num" };

/** A table that stacks into cards on a phone (class "stack"), scrolling inside its card when wider. */
export function StackTable({ columns, children }: { columns: Column[]; children?: Child }) {
  return (
    <TableWrap>
      <table class="stack">
        <thead>
          <tr>
            {columns.map((column) => (typeof column === "string" ? <th>{column}</th> : <th class={column.class}>{column.label}</th>))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </TableWrap>
  );
}

/** An object shown in a short table of amounts: payments, payouts, refunds. */
interface AmountRow {
  id: string;
  amount: number;
  currency: string;
  status: string;
  created_at: string;
}

/**
 * A short table of objects with an amount: amount and status first, then the id (linked to its
 * page when `href` is given) and when it was created. Each row carries `data-{kind}` = its id.
 */
export function AmountRows({ rows, kind, label, href }: { rows: AmountRow[]; kind: string; label: string; href?: (id: string) => string }) {
  return (
    <StackTable columns={[{ label: "Amount", class: "num" }, "Status", label, "Created"]}>
      {rows.map((row) => (
        <tr {...{ [`data-${kind}`]: row.id }}>
          <td class="num lead">
            <Money minor={row.amount} currency={row.currency} />
          </td>
          <td class="lead">
            <StatusBadge status={row.status} />
          </td>
          <td data-label={label}>
            <Id id={row.id} href={href?.(row.id)} />
          </td>
          <td data-label="Created">
            <Time iso={row.created_at} />
          </td>
        </tr>
      ))}
    </StackTable>
  );
}

/** A short list of payments, each linked to its page: amount and status first. */
export function PaymentRows({ payments }: { payments: AmountRow[] }) {
  return <AmountRows rows={payments} kind="payment" label="Payment" href={(id) => `/dashboard/payments/${encodeURIComponent(id)}`} />;
}

/** One fact of an object's page (in a `dl class="facts"`): its term, and its value with the value's attributes. */
export function Fact({ term, children, ...value }: { term: Child; children?: Child } & Record<string, unknown>) {
  return (
    <>
      <dt>{term}</dt>
      <dd {...value}>{children}</dd>
    </>
  );
}

/** The top of an object's page: its amount (or what stands for it), its status, and any action on it. */
export function Headline({ amount, status, children }: { amount: Child; status: string; children?: Child }) {
  return (
    <div class="headline">
      <span class="amount">{amount}</span>
      <StatusBadge status={status} />
      {children}
    </div>
  );
}

/** The link from an object's page back to its list. */
export function BackLink({ href, children }: { href: string; children?: Child }) {
  return (
    <p>
      <a href={href}>← {children}</a>
    </p>
  );
}
