// An invoice's PDF as a customer opens it: fetched through the API, opened with a PDF parser
// (unpdf: PDF.js's serverless build, run in workerd like the Worker), its text with runs joined by
// single spaces.
import { exports } from "cloudflare:workers";
import { extractText, getDocumentProxy } from "unpdf";
import { expect } from "vitest";
import { BASE } from "./http";

export async function invoicePdfText(key: string, invoiceId: string): Promise<string> {
  const res = await exports.default.fetch(`${BASE}/invoices/${invoiceId}/pdf`, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("application/pdf");
  const doc = await getDocumentProxy(new Uint8Array(await res.arrayBuffer()));
  const { text } = await extractText(doc, { mergePages: true });
  return text.replace(/\s+/g, " ");
}
