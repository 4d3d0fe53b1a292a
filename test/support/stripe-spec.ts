// Checks requests to Stripe, and the fake Stripe's answers, against Stripe's own OpenAPI document
// (the cut in test/fixtures/stripe/openapi.json). A request is checked as Stripe would read it:
// the path and method exist; the form body (`a[b][c]=v`, `a[0]=v`) and the query string are
// decoded into nested values and every parameter must exist with the right type, enum and length;
// required ones must be present. An answer's object is checked one level deep (its fields and their
// types; fields it does not name are allowed, as newer API versions add some). Plain TypeScript with no imports, so the Node fake server (scripts/fake-stripe.ts) runs it too.

/** The subset of JSON Schema Stripe's document uses. */
export interface Schema {
  type?: "string" | "integer" | "number" | "boolean" | "object" | "array";
  enum?: unknown[];
  maxLength?: number;
  nullable?: boolean;
  anyOf?: Schema[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  required?: string[];
  items?: Schema;
  "x-stripe-object"?: string;
  [key: string]: unknown;
}

interface Parameter {
  name: string;
  in: "path" | "query" | "header";
  required?: boolean;
  schema: Schema;
}

interface Operation {
  operationId: string;
  parameters: Parameter[];
  requestBody?: { required: boolean; content: Record<string, { schema: Schema }> };
  responses: Record<string, { content: Record<string, { schema: Schema }> }>;
}

export interface StripeSpec {
  info: Record<string, unknown>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

/** A decoded form or query value: strings at the leaves. */
export type FormValue = string | FormValue[] | { [key: string]: FormValue };

export interface RequestCheck {
  /** `POST /v1/payment_intents`, or null when no operation of the document matches. */
  operation: string | null;
  violations: string[];
  /** The decoded parameters (body for POST, query for GET). */
  params: Record<string, FormValue>;
  /** The path parameters, by name. */
  pathParams: Record<string, string>;
}

/** Decodes `a[b][0][c]=v` pairs into nested objects and arrays, as Stripe's form parser does. */
export function decodeForm(pairs: Iterable<[string, string]>): Record<string, FormValue> {
  const root: Record<string, FormValue> = {};
  for (const [rawKey, value] of pairs) {
    const match = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(rawKey);
    const path = match ? [match[1], ...[...match[2].matchAll(/\[([^[\]]*)\]/g)].map((m) => m[1])] : [rawKey];
    let node: Record<string, FormValue> | FormValue[] = root;
    for (let i = 0; i < path.length; i++) {
      const segment = path[i];
      const last = i === path.length - 1;
      const nextIsIndex = !last && /^\d*$/.test(path[i + 1]);
      const key = Array.isArray(node) ? (segment === "" ? node.length : Number(segment)) : segment;
      const container = node as Record<string | number, FormValue>;
      if (last) {
        container[key] = value;
      } else {
        if (container[key] === undefined || typeof container[key] === "string") container[key] = nextIsIndex ? [] : {};
        node = container[key] as Record<string, FormValue> | FormValue[];
      }
    }
  }
  return root;
}

const typeOf = (value: unknown) => (value === null ? "null" : Array.isArray(value) ? "array" : typeof value);

/** Validates a decoded request value (strings at the leaves) against a parameter schema. */
function checkParam(schema: Schema, value: FormValue, at: string, problems: string[]): void {
  if (schema.anyOf) {
    const branches = schema.anyOf.map((branch) => {
      const found: string[] = [];
      checkParam(branch, value, at, found);
      return found;
    });
    if (branches.some((found) => found.length === 0)) return;
    // Report the branch of the right shape (object vs leaf) when there is one: it says most.
    const shaped = schema.anyOf.findIndex((branch) => (branch.type === "object") === (typeof value === "object" && !Array.isArray(value)));
    problems.push(...(shaped >= 0 ? branches[shaped] : [`${at}: matches none of ${schema.anyOf.length} allowed forms`]));
    return;
  }
  switch (schema.type) {
    case "object": {
      if (typeof value !== "object" || Array.isArray(value)) {
        problems.push(`${at}: expected an object (${at}[key]=…), got ${typeOf(value)}`);
        return;
      }
      for (const required of schema.required ?? []) {
        if (value[required] === undefined) problems.push(`${at}[${required}]: required, missing`);
      }
      for (const [key, inner] of Object.entries(value)) {
        const property = schema.properties?.[key];
        if (property) checkParam(property, inner, `${at}[${key}]`, problems);
        else if (typeof schema.additionalProperties === "object") checkParam(schema.additionalProperties, inner, `${at}[${key}]`, problems);
        else if (schema.additionalProperties !== true) problems.push(`${at}[${key}]: unknown parameter`);
      }
      return;
    }
    case "array": {
      if (!Array.isArray(value)) {
        problems.push(`${at}: expected an array (${at}[0]=…), got ${typeOf(value)}`);
        return;
      }
      value.forEach((item, index) => {
        if (item === undefined) problems.push(`${at}[${index}]: a gap in the array`);
        else if (schema.items) checkParam(schema.items, item, `${at}[${index}]`, problems);
      });
      return;
    }
    default:
      checkLeaf(schema, value, at, problems);
  }
}

function checkLeaf(schema: Schema, value: FormValue, at: string, problems: string[]): void {
  if (typeof value !== "string") {
    problems.push(`${at}: expected a ${schema.type ?? "value"}, got ${typeOf(value)}`);
    return;
  }
  if (schema.type === "integer" && !/^-?\d+$/.test(value)) problems.push(`${at}: expected an integer, got "${value}"`);
  if (schema.type === "number" && !/^-?\d+(\.\d+)?$/.test(value)) problems.push(`${at}: expected a number, got "${value}"`);
  if (schema.type === "boolean" && value !== "true" && value !== "false") problems.push(`${at}: expected true or false, got "${value}"`);
  if (schema.enum && !schema.enum.includes(value)) problems.push(`${at}: "${value}" is not one of ${JSON.stringify(schema.enum)}`);
  if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(`${at}: longer than ${schema.maxLength} characters`);
}

function matchPath(template: string, path: string): Record<string, string> | null {
  const names: string[] = [];
  const pattern = new RegExp(`^${template.replace(/\{([^}]+)\}/g, (_, name: string) => (names.push(name), "([^/]+)"))}$`);
  const match = pattern.exec(path);
  if (!match) return null;
  return Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(match[i + 1])]));
}

/** Finds the operation for a method and a concrete path; literal paths win over templated ones. */
export function findOperation(spec: StripeSpec, method: string, path: string) {
  const candidates = Object.keys(spec.paths).sort((a, b) => (a.includes("{") ? 1 : 0) - (b.includes("{") ? 1 : 0));
  for (const template of candidates) {
    const pathParams = matchPath(template, path);
    const operation = pathParams && spec.paths[template][method.toLowerCase()];
    if (pathParams && operation) return { template, operation, pathParams };
  }
  return null;
}

/** Checks one request as Stripe would read it. `body` is the form-encoded body (POST). */
export function checkRequest(spec: StripeSpec, request: { method: string; url: string; body?: string }): RequestCheck {
  const url = new URL(request.url, "https://api.stripe.com");
  const method = request.method.toUpperCase();
  const found = findOperation(spec, method, url.pathname);
  if (!found) {
    const pathKnown = Object.keys(spec.paths).some((template) => matchPath(template, url.pathname));
    return {
      operation: null,
      violations: [`${method} ${url.pathname}: ${pathKnown ? "method not allowed on this path" : "no such path"} in Stripe's document`],
      params: {},
      pathParams: {},
    };
  }
  const { template, operation, pathParams } = found;
  const violations: string[] = [];
  const query = decodeForm(url.searchParams.entries());
  const queryParams = operation.parameters.filter((p) => p.in === "query");
  for (const parameter of queryParams) {
    if (parameter.required && query[parameter.name] === undefined) violations.push(`query ${parameter.name}: required, missing`);
  }
  for (const [name, value] of Object.entries(query)) {
    const parameter = queryParams.find((p) => p.name === name);
    if (!parameter) violations.push(`query ${name}: unknown parameter`);
    else checkParam(parameter.schema, value, `query ${name}`, violations);
  }
  const bodyText = request.body ?? "";
  const params = method === "GET" ? query : decodeForm(new URLSearchParams(bodyText).entries());
  if (method !== "GET") {
    const form = operation.requestBody?.content["application/x-www-form-urlencoded"]?.schema;
    if (!form) {
      if (bodyText) violations.push("body: this operation takes no form body");
    } else {
      checkParam(form, params, "body", violations);
    }
  } else if (bodyText) {
    violations.push("body: a GET request sends its parameters in the query string");
  }
  return { operation: `${method} ${template}`, violations: violations.map((v) => v.replace(/^body\[([^\]]+)\]/, "$1")), params, pathParams };
}

/** Checks an answer's JSON (already parsed) against one schema: fields one level deep. */
export function checkObject(spec: StripeSpec, schema: Schema, value: unknown, at: string, problems: string[], depth = 0): void {
  if (value === null) {
    if (!schema.nullable) problems.push(`${at}: null, but the field is not nullable`);
    return;
  }
  if (schema["x-stripe-object"]) {
    const named = spec.components.schemas[schema["x-stripe-object"]];
    // An expandable field may hold the object or its id; an object is checked only at the top.
    if (typeof value === "string") return;
    if (typeOf(value) !== "object") problems.push(`${at}: expected a ${schema["x-stripe-object"]} object, got ${typeOf(value)}`);
    else if (named && depth === 0) checkObject(spec, named, value, at, problems, depth + 1);
    return;
  }
  if (schema.anyOf) {
    const ok = schema.anyOf.some((branch) => {
      const found: string[] = [];
      checkObject(spec, { ...branch, nullable: branch.nullable ?? schema.nullable }, value, at, found, depth);
      return found.length === 0;
    });
    if (!ok) problems.push(`${at}: ${JSON.stringify(value).slice(0, 80)} matches none of the allowed forms`);
    return;
  }
  const actual = typeOf(value);
  switch (schema.type) {
    case "object":
      if (actual !== "object") return void problems.push(`${at}: expected an object, got ${actual}`);
      for (const required of schema.required ?? []) {
        if (!(required in (value as object))) problems.push(`${at}.${required}: required, missing`);
      }
      for (const [key, inner] of Object.entries(value as Record<string, unknown>)) {
        const property = schema.properties?.[key];
        // A field the document does not name is allowed: newer API versions add fields, and
        // clients ignore what they do not know (Stripe's fixtures are newer than this document).
        if (property) checkObject(spec, property, inner, `${at}.${key}`, problems, depth);
      }
      return;
    case "array":
      if (actual !== "array") return void problems.push(`${at}: expected an array, got ${actual}`);
      if (schema.items) (value as unknown[]).forEach((item, i) => checkObject(spec, schema.items as Schema, item, `${at}[${i}]`, problems, depth));
      return;
    case "integer":
      if (!Number.isInteger(value)) problems.push(`${at}: expected an integer, got ${JSON.stringify(value)}`);
      return;
    case "number":
      if (actual !== "number") problems.push(`${at}: expected a number, got ${actual}`);
      return;
    case "boolean":
      if (actual !== "boolean") problems.push(`${at}: expected a boolean, got ${actual}`);
      return;
    case "string":
      if (actual !== "string") return void problems.push(`${at}: expected a string, got ${actual}`);
      if (schema.enum && !schema.enum.includes(value)) problems.push(`${at}: "${value}" is not one of ${JSON.stringify(schema.enum)}`);
      return;
    default:
      return;
  }
}

/** Checks an answer: a 200 against the operation's schema, anything else against Stripe's error. */
export function checkResponse(spec: StripeSpec, operation: string, status: number, body: unknown): string[] {
  const [method, template] = operation.split(" ");
  const op = spec.paths[template]?.[method.toLowerCase()];
  if (!op) return [`${operation}: not in Stripe's document`];
  const schema = status === 200 ? op.responses["200"].content["application/json"].schema : spec.components.schemas.error;
  const problems: string[] = [];
  checkObject(spec, schema, body, status === 200 ? "answer" : "error answer", problems);
  return problems;
}
