// A form sent back with problems: the page is drawn again with the form as it was filled in and
// each problem beside its field, never replaced by an error page that names only the first.
//
// Where the problems come from, in order (docs/dashboard.md, "Form errors"):
// 1. the dashboard's own reading of each field (a price typed in major units, a UTC time, a tier
//    row, the webhook URL policy), every field checked, every problem kept;
// 2. the API route's own zod schema (src/routes/*/schema.ts), run on the body the form would send,
//    which reports every issue at once: a rule the API adds to its schema shows here too;
// 3. the API itself, which stops at its first problem: its error names the field in `param`, and
//    it is shown beside that field (or above the form when the form has no such field).
// Only when 1 and 2 find nothing is the request sent, so a form with several bad fields shows all.
import type { Child } from "hono/jsx";
import type { ZodType } from "zod";
import type { ApiErrorBody } from "./context";
import { ErrorPanel, errorTitle } from "./layout";

/** Field values as a form sends them: one string, or several for a repeated field. */
export type FormValues = Record<string, string | string[]>;

export interface FormState {
  /** The form's action: the page may hold several forms (a refund field on every row). */
  action: string;
  values: FormValues;
  /** The problems by field key: a field's name, or `name.row` for a repeated field (`tier_unit_price.1`). */
  problems: Map<string, string[]>;
  /** The API's refusal when it names no field of this form (a 409, a 403, a 404), shown above the form. */
  refusal?: { status: number; error: ApiErrorBody; what: string };
  /** Set when the problems are the API's answer (the form was sent): its request id. */
  sent?: { requestId: string };
}

/** The key of a problem that belongs to the whole form rather than one field. */
export const FORM_KEY = "_form";

export const newFormState = (action: string, values: FormValues): FormState => ({ action, values, problems: new Map() });

/** Adds a problem for a field (one field may have several). */
export function addProblem(state: FormState, key: string, message: string) {
  const list = state.problems.get(key) ?? [];
  if (!list.includes(message)) list.push(message);
  state.problems.set(key, list);
}

export const hasProblems = (state: FormState) => state.problems.size > 0 || state.refusal !== undefined;

/** The status of a page drawn again for a form: the API's when it refused, 400 for a problem with a field. */
export const formStatus = (state: FormState) => state.refusal?.status ?? 400;

/**
 * Checks `body` with the API route's schema and adds every issue to the field `fieldOf` names for
 * its path, unless that field already has a problem of the dashboard's own (which says it better).
 * An issue on no field of the form is shown above the form.
 */
export function checkWithSchema(state: FormState, schema: ZodType, body: unknown, fieldOf: (path: string) => string | undefined) {
  const result = schema.safeParse(body);
  if (result.success) return;
  for (const issue of result.error.issues) {
    const path = issue.path.map(String).join(".");
    const key = fieldOf(path) ?? FORM_KEY;
    if (key !== FORM_KEY && state.problems.has(key)) continue;
    addProblem(state, key, path && key === FORM_KEY ? `${path}: ${issue.message}` : issue.message);
  }
}

/**
 * The API's error as a form problem: a 400 beside the field its `param` names when the form has
 * that field (with its code), anything else above the form with its status, code and request id.
 */
export function addApiError(state: FormState, status: number, error: ApiErrorBody, what: string, fieldOf: (param: string) => string | undefined) {
  state.sent = { requestId: error.request_id };
  const key = error.param ? fieldOf(error.param) : undefined;
  if (key && status === 400) addProblem(state, key, `${error.message} (${error.code})`);
  else state.refusal = { status, error, what };
}

/** This form's state, when the page is drawn again for it (another form's state is not this one's). */
export const stateFor = (state: FormState | undefined, action: string) => (state?.action === action ? state : undefined);

/** The value a field was sent with (the `index`th of a repeated field), or the fallback on a fresh form. */
export function valueOf(state: FormState | undefined, name: string, fallback = "", index?: number): string {
  if (!state) return fallback;
  const value = state.values[name] ?? state.values[`${name}[]`];
  if (value === undefined) return index === undefined ? fallback : "";
  if (Array.isArray(value)) return value[index ?? 0] ?? "";
  return index === undefined || index === 0 ? value : "";
}

/** Whether a checkbox was ticked when the form was sent (or `fallback` on a fresh form). */
export function checked(state: FormState | undefined, name: string, value: string, fallback = false): boolean {
  if (!state) return fallback;
  const sent = state.values[name] ?? state.values[`${name}[]`];
  return Array.isArray(sent) ? sent.includes(value) : sent === value;
}

const problemId = (action: string, key: string) => `problem-${action.replace(/[^A-Za-z0-9]+/g, "-")}-${key.replace(/[^A-Za-z0-9]+/g, "-")}`;

/** The attributes of a field with problems: aria-invalid, and the problems as its description. */
export function invalid(state: FormState | undefined, key: string): Record<string, string> {
  if (!state?.problems.has(key)) return {};
  return { "aria-invalid": "true", "aria-describedby": problemId(state.action, key) };
}

/** The problems of one field, drawn beside it. */
export function Problems({ state, field }: { state: FormState | undefined; field: string }) {
  const messages = state?.problems.get(field);
  if (!messages?.length) return null;
  return (
    <span class="field-error" id={problemId(state!.action, field)} data-problem={field}>
      {messages.join(" ")}
    </span>
  );
}

/** Above the form: how many fields need a change, the problems of no one field, and the API's refusal. */
export function FormSummary({ state }: { state: FormState | undefined }) {
  if (!state || !hasProblems(state)) return null;
  const fieldCount = [...state.problems.keys()].filter((k) => k !== FORM_KEY).length;
  const general = state.problems.get(FORM_KEY) ?? [];
  const children: Child[] = [];
  if (fieldCount > 0) {
    children.push(
      <p>
        <strong>{fieldCount === 1 ? "One field needs a change" : `${fieldCount} fields need a change`}</strong>: each problem is shown beside its field, and
        what you typed is kept.{" "}
        {state.sent ? (
          <>
            The API refused the form (request id <span class="mono">{state.sent.requestId}</span>).
          </>
        ) : (
          "Nothing was sent to the API."
        )}
      </p>,
    );
  }
  for (const message of general) children.push(<p>{message}</p>);
  return (
    <div class="form-problems" role="alert">
      {children}
      {state.refusal ? <ErrorPanel status={state.refusal.status} error={state.refusal.error} title={errorTitle(state.refusal.status, state.refusal.what)} /> : null}
    </div>
  );
}
