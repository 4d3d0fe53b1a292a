// Drives the dashboard as a browser would, over the Worker's fetch: a cookie jar of one session
// cookie, forms read from the rendered HTML (their hidden CSRF token and Idempotency-Key), and
// POSTs sent with this origin, as a browser sends them.
import { exports } from "cloudflare:workers";
import { expect } from "vitest";
import { BASE } from "../support/http";

export interface Page {
  status: number;
  headers: Headers;
  html: string;
  location: string | null;
}

export async function dashboardFetch(path: string, init: { method?: string; cookie?: string; form?: Record<string, string | string[]>; headers?: Record<string, string> } = {}): Promise<Page> {
  const headers = new Headers(init.headers);
  if (init.cookie) headers.set("cookie", init.cookie);
  let body: string | undefined;
  if (init.form) {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(init.form)) for (const v of Array.isArray(value) ? value : [value]) params.append(name, v);
    body = params.toString();
    if (!headers.has("content-type")) headers.set("content-type", "application/x-www-form-urlencoded");
    if (!headers.has("origin")) headers.set("origin", BASE);
  }
  const response = await exports.default.fetch(`${BASE}${path}`, { method: init.method ?? (body ? "POST" : "GET"), headers, body, redirect: "manual" });
  return { status: response.status, headers: response.headers, html: await response.text(), location: response.headers.get("location") };
}

/** The session cookie set by an answer, as a Cookie header value. */
export function sessionCookie(page: Page): string {
  const set = page.headers.getSetCookie().find((c) => c.startsWith("tender_session="));
  expect(set, "a session cookie is set").toBeDefined();
  return set!.split(";")[0];
}

export async function signIn(key: string): Promise<string> {
  const page = await dashboardFetch("/dashboard/sign-in", { form: { api_key: key } });
  expect(page.status, page.html.slice(0, 500)).toBe(303);
  expect(page.location).toBe("/dashboard");
  return sessionCookie(page);
}

const decode = (s: string) => s.replaceAll("&amp;", "&").replaceAll("&quot;", '"').replaceAll("&#39;", "'").replaceAll("&lt;", "<").replaceAll("&gt;", ">");

/** The fields of the form posting to `action` on the page (inputs with a value; checkboxes only when ticked). */
export function formOf(html: string, action: string): Record<string, string> {
  const start = html.indexOf(`action="${action}"`);
  expect(start, `a form posting to ${action}`).toBeGreaterThan(-1);
  const end = html.indexOf("</form>", start);
  const fields: Record<string, string> = {};
  for (const match of html.slice(start, end).matchAll(/<input([^>]*)>/g)) {
    // A browser sends a checkbox only when it is ticked.
    if (/type="(checkbox|radio)"/.test(match[1]) && !/\bchecked\b/.test(match[1])) continue;
    const name = /name="([^"]*)"/.exec(match[1])?.[1];
    const value = /value="([^"]*)"/.exec(match[1])?.[1];
    if (name && value !== undefined) fields[name] = decode(value);
  }
  return fields;
}

/** Loads `page`, then submits its form posting to `action` with `extra` fields. */
export async function submit(cookie: string, page: string, action: string, extra: Record<string, string | string[]> = {}): Promise<Page> {
  const loaded = await dashboardFetch(page, { cookie });
  expect(loaded.status, loaded.html.slice(0, 500)).toBe(200);
  return dashboardFetch(action, { cookie, form: { ...formOf(loaded.html, action), ...extra } });
}

/** The visible text of an HTML fragment (tags dropped, a <wbr> with no space, entities decoded, spaces collapsed). */
export const textOf = (html: string) => decode(html.replace(/<wbr\s*\/?>/g, "").replace(/<[^>]+>/g, " ")).replace(/\s+/g, " ").trim();
