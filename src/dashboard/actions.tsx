// How a dashboard form becomes an API request: the form's fields are read and checked (a bad
// field gets a 400 page naming it), its Idempotency-Key (made when the page was rendered) goes
// with the request, the API answers, and the page shows either the API's error (its status,
// message, code and request id) or the outcome (a redirect with a notice, or a secret shown once).
import type { Context } from "hono";
import type { ApiAnswer } from "./api";
import type { DashEnv } from "./context";
import { ErrorPanel, errorTitle, render } from "./layout";

const IDEMPOTENCY_KEY = /^dash_[0-9A-Za-z]{32}$/;

/** One form field as a string ("" when absent; the first value when repeated). */
export function field(c: Context<DashEnv>, name: string): string {
  const value = c.var.form[name];
  return (Array.isArray(value) ? value[0] : value) ?? "";
}

/** Every value of a repeated field (checkboxes, tier rows). */
export function fields(c: Context<DashEnv>, name: string): string[] {
  const value = c.var.form[name] ?? c.var.form[`${name}[]`];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/** A 4xx page for input the dashboard refuses before asking the API. */
export function refuse(c: Context<DashEnv>, status: 400 | 403 | 404 | 409 | 413 | 415, message: string, back: string, code = "invalid_form", param?: string) {
  return render(c, status, {
    title: status === 403 || status === 409 ? "Refused" : status === 404 ? "Not found" : "Check the form",
    children: (
      <>
        <ErrorPanel status={status} error={{ type: "invalid_request_error", code, message, param, request_id: c.var.requestId }} title="The dashboard refused this request" />
        <p>
          <a href={back}>← Back</a>
        </p>
      </>
    ),
  });
}

/** The page of an API error, with what was being done and the way back. */
export function apiErrorPage(c: Context<DashEnv>, answer: Extract<ApiAnswer<unknown>, { ok: false }>, what: string, back: string) {
  return render(c, answer.status, {
    title: errorTitle(answer.status, what),
    children: (
      <>
        <ErrorPanel status={answer.status} error={answer.error} title={errorTitle(answer.status, what)} />
        <p>
          <a href={back}>← Back</a>
        </p>
      </>
    ),
  });
}

/** The form's Idempotency-Key, or undefined when it is missing or malformed. */
export function idempotencyKeyOf(c: Context<DashEnv>): string | undefined {
  const key = field(c, "idempotency_key");
  return IDEMPOTENCY_KEY.test(key) ? key : undefined;
}

/**
 * Runs one action through the API with the form's Idempotency-Key. A double submit sends the same
 * key, so the API replays its first answer instead of acting twice.
 */
export async function act<T>(
  c: Context<DashEnv>,
  options: {
    what: string;
    back: string;
    send: (idempotencyKey: string) => Promise<ApiAnswer<T>>;
    done: (body: T) => Response | Promise<Response>;
    /** The page for the API's refusal; by default an error page with a way back. A form draws itself again with the problem beside its field. */
    failed?: (answer: Extract<ApiAnswer<T>, { ok: false }>) => Response | Promise<Response>;
  },
): Promise<Response> {
  const key = idempotencyKeyOf(c);
  if (!key) return refuse(c, 400, "This form has no valid idempotency key. Reload the page and submit the form again.", options.back, "idempotency_key_missing");
  const answer = await options.send(key);
  if (!answer.ok) return options.failed ? options.failed(answer) : apiErrorPage(c, answer, options.what, options.back);
  return options.done(answer.body);
}

/** After an action: back to the page, with a notice naming the object (Post/Redirect/Get). */
export function redirectWithNotice(c: Context<DashEnv>, path: string, notice: string, id: string) {
  const url = new URL(path, c.req.url);
  url.searchParams.set("done", notice);
  url.searchParams.set("id", id);
  return c.redirect(`${url.pathname}${url.search}`, 303);
}
