// x-codeSamples for the OpenAPI document: each operation called through @tender/client, so /docs
// shows the client beside the curl its reference renders. Written from the operation itself (its
// method, path, path parameters and required body fields with their examples), so a sample never
// drifts from what the route validates.

type Json = Record<string, any>;

const METHODS = ["get", "post", "put", "patch", "delete"] as const;

/** `#/components/schemas/Payout` → the schema itself (one level: the document's own refs). */
function resolve(document: Json, schema: Json | undefined): Json | undefined {
  if (!schema?.$ref) return schema;
  const name = String(schema.$ref).split("/").pop()!;
  return document.components?.schemas?.[name];
}

/** A field's sample value: its example, else its first enum value, else a value of its type. */
function sampleOf(document: Json, property: Json): unknown {
  const schema = resolve(document, property) ?? {};
  if (schema.example !== undefined) return schema.example;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== "null") : schema.type;
  if (type === "integer" || type === "number") return schema.minimum ?? 1;
  if (type === "boolean") return true;
  if (type === "array") return [];
  if (type === "object") return {};
  return "…";
}

/** The body a sample sends: the required fields (or, when none is, the first field with an example). */
function bodyOf(document: Json, operation: Json): Json | undefined {
  const schema = resolve(document, operation.requestBody?.content?.["application/json"]?.schema);
  if (!schema?.properties) return undefined;
  const required: string[] = schema.required ?? [];
  const fields = required.length > 0 ? required : Object.keys(schema.properties).filter((name) => resolve(document, schema.properties[name])?.example !== undefined).slice(0, 1);
  return Object.fromEntries(fields.map((name) => [name, sampleOf(document, schema.properties[name])]));
}

/** What the answer is called in the sample: `payout` for a Payout, `page` for a list. */
function resultName(document: Json, operation: Json): string {
  const success = Object.entries(operation.responses ?? {}).find(([status]) => status.startsWith("2"))?.[1] as Json | undefined;
  const ref: string | undefined = success?.content?.["application/json"]?.schema?.$ref;
  if (!ref) return "answer";
  const name = ref.split("/").pop()!;
  if (name.endsWith("List")) return "page";
  const word = name.replace(/^(Created|Deleted)/, "");
  return word.charAt(0).toLowerCase() + word.slice(1);
}

/** A value as TypeScript source: `{ amount: 1000, currency: "usd" }`. */
function literal(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(literal).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const fields = Object.entries(value).map(([key, v]) => `${/^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key)}: ${literal(v)}`);
    return fields.length === 0 ? "{}" : `{ ${fields.join(", ")} }`;
  }
  return JSON.stringify(value);
}

/** The @tender/client call for one operation. */
export function clientSample(document: Json, method: string, path: string, operation: Json): string {
  const pathParams = (operation.parameters ?? []).filter((p: Json) => p.in === "path");
  const init: string[] = [];
  if (pathParams.length > 0) {
    const values = Object.fromEntries(pathParams.map((p: Json) => [p.name, p.example ?? p.schema?.example ?? "…"]));
    init.push(`params: { path: ${literal(values)} }`);
  }
  const body = bodyOf(document, operation);
  if (body) init.push(`body: ${literal(body)}`);
  const args = [JSON.stringify(path), ...(init.length > 0 ? [`{ ${init.join(", ")} }`] : [])].join(", ");
  return [
    'import { Tender } from "@tender/client";',
    "",
    'const tender = new Tender({ apiKey: "sk_test_…" }); // your key; baseUrl: where Tender runs (default http://127.0.0.1:8787)',
    `const ${resultName(document, operation)} = await tender.${method.toUpperCase()}(${args});`,
  ].join("\n");
}

/**
 * The document with an x-codeSamples entry on every operation that takes an API key. The public ones (sign-up, the token exchange, Stripe's own webhook) are not the
 * client's: their references show curl alone.
 */
export function withCodeSamples<T extends Json>(document: T): T {
  for (const [path, item] of Object.entries(document.paths ?? {}) as [string, Json][]) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation || !Array.isArray(operation.security) || operation.security.length === 0) continue;
      operation["x-codeSamples"] = [{ lang: "TypeScript", label: "@tender/client", source: clientSample(document, method, path, operation) }];
    }
  }
  return document;
}
