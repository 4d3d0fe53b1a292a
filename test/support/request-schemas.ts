// The request side of GET /openapi.json, as the running Worker documents it: each operation's
// body schema and query parameters with their $refs resolved, every field of a body by its path
// (`tiers.0.up_to`), and values each field's schema refuses. The strict-input and message suites
// walk these, so a field added to a schema is walked without a change here.
import { expect } from "vitest";
import { call } from "./http";
import type { Operation } from "./operations";

export type JsonSchema = {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  allOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
};

export interface Document {
  paths: Record<string, Record<string, any>>;
  components: { schemas: Record<string, JsonSchema> };
}

export async function openapiDocument(): Promise<Document> {
  const res = await call("/openapi.json");
  expect(res.status).toBe(200);
  return res.body;
}

/** `schema` with its $ref (and an allOf of objects) resolved, one level deep. */
export function resolve(doc: Document, schema: JsonSchema): JsonSchema {
  if (schema.$ref) return resolve(doc, doc.components.schemas[schema.$ref.replace("#/components/schemas/", "")]);
  if (schema.allOf) {
    const parts = schema.allOf.map((part) => resolve(doc, part));
    return {
      ...schema,
      allOf: undefined,
      type: "object",
      properties: Object.assign({}, ...parts.map((p) => p.properties ?? {})),
      required: parts.flatMap((p) => p.required ?? []),
      additionalProperties: parts.some((p) => p.additionalProperties === false) ? false : undefined,
    };
  }
  return schema;
}

const operationOf = (doc: Document, op: Operation) => doc.paths[op.path][op.method];

/** The operation's JSON body schema, resolved, or undefined when it documents none. */
export function bodySchema(doc: Document, op: Operation): JsonSchema | undefined {
  const schema = operationOf(doc, op).requestBody?.content?.["application/json"]?.schema;
  return schema ? resolve(doc, schema) : undefined;
}

/** The operation's query parameters: name and resolved schema. */
export function queryParameters(doc: Document, op: Operation): { name: string; schema: JsonSchema }[] {
  return (operationOf(doc, op).parameters ?? [])
    .filter((p: any) => p.in === "query")
    .map((p: any) => ({ name: p.name, schema: resolve(doc, p.schema ?? {}) }));
}

export const typesOf = (schema: JsonSchema): string[] => (Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []);

export interface Field {
  /** As the error's `param` names it: `tiers.0.up_to`. */
  path: string;
  keys: (string | number)[];
  schema: JsonSchema;
  required: boolean;
}

/** Every field of a body schema, nested objects and list items included (items as `.0`). */
export function fieldsOf(doc: Document, schema: JsonSchema, keys: (string | number)[] = []): Field[] {
  const fields: Field[] = [];
  const object = resolve(doc, schema);
  for (const [name, property] of Object.entries(object.properties ?? {})) {
    const resolved = resolve(doc, property);
    const at = [...keys, name];
    fields.push({ path: at.join("."), keys: at, schema: resolved, required: (object.required ?? []).includes(name) });
    if (resolved.properties) fields.push(...fieldsOf(doc, resolved, at));
    if (resolved.items) {
      const item = resolve(doc, resolved.items);
      const itemAt = [...at, 0];
      fields.push({ path: itemAt.join("."), keys: itemAt, schema: item, required: false });
      if (item.properties) fields.push(...fieldsOf(doc, item, itemAt));
    }
  }
  return fields;
}

/** Every object schema a body is made of, with where it sits: the body, nested objects, list items. */
export function objectsOf(doc: Document, schema: JsonSchema, path = ""): { path: string; schema: JsonSchema }[] {
  const resolved = resolve(doc, schema);
  const found = typesOf(resolved).includes("object") || resolved.properties ? [{ path: path || "(body)", schema: resolved }] : [];
  for (const [name, property] of Object.entries(resolved.properties ?? {})) found.push(...objectsOf(doc, property, path ? `${path}.${name}` : name));
  if (resolved.items) found.push(...objectsOf(doc, resolved.items, `${path}.0`));
  return found;
}

/**
 * JSON values the field's schema refuses: another JSON type, a value outside its set, its length
 * or its range, a malformed e-mail or date-time, an empty or overlong list. `null` is offered
 * only where the schema does not allow it.
 */
export function refusedValues(schema: JsonSchema, validItem?: unknown): unknown[] {
  const types = typesOf(schema);
  const values: unknown[] = [];
  const numeric = types.includes("number") || types.includes("integer");
  if (!types.includes("string")) values.push("not of this type");
  else if (!numeric) values.push(12345);
  if (!types.includes("object") && !types.includes("array")) values.push({ nested: true });
  if (!types.includes("boolean") && !types.includes("string")) values.push(true);
  if (!types.includes("null")) values.push(null);
  if (types.includes("string")) {
    if (schema.enum) values.push("zz-not-one-of-them");
    if (schema.maxLength !== undefined) values.push("x".repeat(schema.maxLength + 1));
    if ((schema.minLength ?? 0) >= 1) values.push("");
    if (schema.format === "email") values.push("not-an-email");
    if (schema.format === "date-time") values.push("next tuesday");
  }
  if (types.includes("integer")) values.push(2.5);
  if (numeric) {
    if (schema.minimum !== undefined) values.push(schema.minimum - 1);
    if (schema.exclusiveMinimum !== undefined) values.push(schema.exclusiveMinimum);
    if (schema.maximum !== undefined) values.push(schema.maximum + 1);
  }
  if (types.includes("array")) {
    if ((schema.minItems ?? 0) >= 1) values.push([]);
    if (schema.maxItems !== undefined && validItem !== undefined) values.push(Array(schema.maxItems + 1).fill(validItem));
  }
  if (types.includes("object") && schema.additionalProperties && typeof schema.additionalProperties === "object") {
    // A free-form map (metadata): a key too long, and a value of a kind it does not store.
    values.push({ ["k".repeat(41)]: "v" }, { note: { nested: true } });
  }
  return values;
}

/** Query-string values the parameter's schema refuses (query values are always text). */
export function refusedQueryValues(schema: JsonSchema): string[] {
  const types = typesOf(schema);
  const values: string[] = [];
  if (schema.enum) values.push("zz-not-one-of-them", "TRUE");
  if (schema.maxLength !== undefined) values.push("x".repeat(schema.maxLength + 1));
  if (types.includes("number") || types.includes("integer")) {
    values.push("abc", "1.5");
    if (schema.minimum !== undefined) values.push(String(schema.minimum - 1));
    if (schema.maximum !== undefined) values.push(String(schema.maximum + 1));
  }
  return values;
}

/** A deep copy of `body` with the value at `keys` replaced (or removed, for `undefined`). */
export function withValue(body: unknown, keys: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(body ?? {}) as Record<string | number, any>;
  let holder = copy;
  for (const key of keys.slice(0, -1)) holder = holder[key];
  const last = keys[keys.length - 1];
  if (value === undefined) delete holder[last];
  else holder[last] = value;
  return copy;
}

/** The value at `keys` of `body`. */
export const valueAt = (body: unknown, keys: (string | number)[]) => keys.reduce<any>((value, key) => value?.[key], body);
