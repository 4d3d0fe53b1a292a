// Invoices: what every subscription charge is for (src/billing/invoices.ts). List, read, the PDF,
// void and Pay now; one file per kind of operation, registered here.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { registerPayInvoice } from "./pay";
import { registerReadInvoices } from "./read";
import { registerVoidInvoice } from "./void";

export function registerInvoices(app: OpenAPIHono<AppEnv>) {
  registerReadInvoices(app);
  registerVoidInvoice(app);
  registerPayInvoice(app);
}
