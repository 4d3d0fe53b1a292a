// GET /docs: the API reference page. Its script is a pinned copy of @scalar/api-reference, served
// by this Worker at /docs/scalar.js (src/routes/docs-script.ts), never from a CDN: this is a page
// where users may paste a key. The Content-Security-Policy allows scripts and requests to this
// origin only.
import type { Context } from "hono";

export const DOCS_SCRIPT_PATH = "/docs/scalar.js";

export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  // The reference injects its own <style> elements.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

// Scalar's hosted features are off: they need scalar.com (which the CSP refuses) or make no sense
// for a payments API: the AI agent ("Ask AI"), "Generate MCP", the developer toolbar (Configure,
// Share, Deploy, shown on localhost by default), the "open in the desktop client" button. No fonts
// from Scalar's servers, no request proxy ("Test Request" calls this origin directly), no telemetry.
// The browser test (test/browser/docs.test.ts) proves the page logs no error and makes no request to
// another origin.
export const DOCS_CONFIGURATION = {
  url: "/openapi.json",
  withDefaultFonts: false,
  hideClientButton: true,
  showDeveloperTools: "never",
  agent: { disabled: true },
  mcp: { disabled: true },
  telemetry: false,
  favicon: "/favicon.ico",
};

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tender API reference</title>
</head>
<body>
<script id="api-reference" data-url="/openapi.json" data-configuration="${JSON.stringify(DOCS_CONFIGURATION).replaceAll('"', "&quot;")}"></script>
<script src="${DOCS_SCRIPT_PATH}"></script>
</body>
</html>
`;

export function docsPage(c: Context) {
  return c.html(page, 200, { "Content-Security-Policy": DOCS_CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer" });
}
